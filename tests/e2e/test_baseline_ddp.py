"""The bare DDP loop, the reference of every multi-GPU figure, as users start it: torchrun's processes of
`python -m rn50.baseline`, here two gloo ranks on the CPU."""

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("flags,broadcast", [([], False), (["--broadcast-buffers"], True)])
def test_the_bare_loop_trains_under_torchrun_with_rn50s_buffer_setting(tmp_path, flags, broadcast):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "-m", "rn50.baseline", "--arch", "resnet18", "--image-size", "32", "--batch-size", "2",
               "--warmup-steps", "1", "--steps", "2", "--precision", "fp32", *flags]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["world_size"] == 2 and result["broadcast_buffers"] is broadcast
    assert result["images_per_sec"] > 0 and len(result["loss_window_edges"]) == 2  # read after the sync, on rank 0
