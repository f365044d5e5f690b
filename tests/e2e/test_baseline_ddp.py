"""The bare DDP loop, the reference of every multi-GPU figure, as users start it: torchrun's processes of
`python -m rn50.baseline`, here two gloo ranks on the CPU."""

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("flags,broadcast,timed", [([], False, True),
                                                   (["--broadcast-buffers", "--comm-iters", "0"], True, False)])
def test_the_bare_loop_trains_under_torchrun_with_rn50s_buffer_setting(tmp_path, flags, broadcast, timed):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "-m", "rn50.baseline", "--arch", "resnet18", "--image-size", "32", "--batch-size", "2",
               "--warmup-steps", "1", "--steps", "2", "--precision", "fp32", *flags]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}  # gloo
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["world_size"] == 2 and result["broadcast_buffers"] is broadcast
    assert result["images_per_sec"] > 0 and len(result["loss_window_edges"]) == 2  # read after the sync, on rank 0
    if not timed:  # --comm-iters 0
        assert "comm/allreduce_ms" not in result and "comm/allreduce_before_ms" not in result
        assert "transport" not in result
        return
    # its gradients' all-reduce timed alone after the windows, as rn50's ranks time theirs
    assert result["comm/allreduce_ms"] > 0 and result["transport"] == "gloo"
    assert result["comm/allreduce_before_ms"] > 0  # and once before the warm-up
    assert result["comm/allreduce_change_pct"] == pytest.approx(
        100 * (result["comm/allreduce_ms"] / result["comm/allreduce_before_ms"] - 1))
    assert result["comm/gradient_MB"] == pytest.approx(11.69e6 * 4 / 1e6, rel=0.01)  # resnet18's fp32 gradients
    assert result["comm/busbw_GBps"] == pytest.approx(
        result["comm/gradient_MB"] / 1e3 / (result["comm/allreduce_ms"] / 1e3) * 2 * (2 - 1) / 2)
