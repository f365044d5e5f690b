"""rn50's DDP step against plain PyTorch DDP on 2 GPUs (issue 42): the same step, the same settings, in one
test, so that a change which slows rn50's multi-GPU step (as Lightning's side stream did: 0.982) fails here.
Needs 2 GPUs: `python -m pytest -m gpu tests/e2e/test_ddp_gpu.py` on a GPU machine."""

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT
from helpers.cli import rn50

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

SETTINGS = ["bench.warmup_steps=20", "bench.steps=100", "bench.repeats=3"]


def gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


@pytest.mark.skipif(gpus() < 2, reason="needs 2 CUDA GPUs")
def test_rn50s_ddp_step_is_as_fast_as_plain_ddp(tmp_path):
    bare = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "rn50.baseline", "--repeats", "3"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert bare.returncode == 0, bare.stderr[-2000:]
    reference = json.loads(bare.stdout.strip().splitlines()[-1])
    run = rn50(tmp_path, "dist=1n2g", *SETTINGS, "hydra.run.dir=run")
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    ratio = summary["throughput/images_per_sec"] / reference["images_per_sec"]
    print(f"rn50 {summary['throughput/images_per_sec']:.1f} / bare {reference['images_per_sec']:.1f} = {ratio:.4f}; "
          f"all-reduce {summary['comm/allreduce_before_ms']:.2f} ms before, {summary['comm/allreduce_ms']:.2f} ms "
          f"after at {summary['comm/busbw_GBps']:.1f} GB/s over {summary.get('transport')} (the bare loop's: "
          f"{reference['comm/allreduce_before_ms']:.2f}, {reference['comm/allreduce_ms']:.2f} ms over "
          f"{reference.get('transport')})")
    assert summary["train/loss_last"] < summary["train/loss_first"] and summary["train/skipped_steps_window"] == 0
    assert summary["comm/allreduce_ms"] > 0 and summary.get("transport")
    assert reference["comm/allreduce_ms"] > 0 and reference["transport"] == summary["transport"]  # one network
    assert ratio >= 0.99
