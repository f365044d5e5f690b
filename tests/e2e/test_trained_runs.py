"""Runs of python -m rn50 that prove they trained (issue 27): an amp run's skipped steps counted, a
run that stalls or diverges failed in one line; on a GPU, time to accuracy. The proof a tiny run
records, and its falling loss: tests/e2e/test_cli.py's tiny run."""

import math
import re

import pytest
import torch

from helpers import TINY
from helpers.cli import rn50
from helpers.store import runs_in


@pytest.mark.slow
def test_an_amp_run_counts_the_steps_its_scaler_skipped_and_fails_if_it_skipped_every_measured_one(tmp_path):
    # 65536, the dynamic scaler's first scale, overflows a fresh network's fp16 gradients a few times.
    done = rn50(tmp_path, *TINY, "precision=amp", "optim.fused=true", "bench.warmup_steps=8", "bench.steps=2",
                "hydra.run.dir=trained")
    assert done.returncode == 0, done.stderr[-3000:]
    m = runs_in(tmp_path)[0].data.metrics
    assert m["train/skipped_steps"] >= 1 and 0 < m["train/loss_scale"] < 65536
    assert m["train/skipped_steps_window"] < 2  # it trained while it was timed
    stalled = rn50(tmp_path, *TINY, "precision=amp", "bench.warmup_steps=1", "bench.steps=2", "hydra.run.dir=stalled")
    assert stalled.returncode == 1
    errors = [line for line in stalled.stderr.splitlines() if "error" in line.lower()]
    assert errors == [errors[0]] and errors[0].startswith(
        "rn50: error: training stalled: the loss scaler skipped all 2 measured steps"), errors
    assert "give it more bench.warmup_steps (1 now)" in errors[0]
    run = next(r for r in runs_in(tmp_path) if r.data.tags["output_dir"].endswith("stalled"))
    assert run.info.status == "FAILED" and run.data.tags["failure"] == "stalled"
    assert "throughput/images_per_sec" not in run.data.metrics and run.data.metrics["train/skipped_steps_window"] == 2


def test_a_run_that_diverges_fails_with_one_line_and_no_figure(tmp_path):
    done = rn50(tmp_path, *TINY, "precision=fp32", "optim.lr=1e12", "bench.warmup_steps=2", "bench.steps=3")
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, errors
    assert re.match(r"rn50: error: training diverged: loss (nan|inf) at step \d+; .*lower optim\.lr \(it was 1e\+12\)",
                    errors[0]), errors
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FAILED" and run.data.tags["failure"] == "diverged"
    assert run.data.tags["error"].startswith("training diverged")
    assert not any(key.startswith(("throughput/", "mfu", "energy/")) for key in run.data.metrics)
    assert not math.isfinite(run.data.metrics["train/loss_last"])


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("precision", ["amp", "amp_static", "bf16", "tf32"])
def test_time_to_accuracy_learns_a_learnable_set_under_every_precision(tmp_path, precision):
    """train=accuracy on rn50.fake_imagenet --learnable (10 classes, each its own colour): 95%
    top-1 within a few epochs; model.num_classes follows the 10 class folders."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from rn50.tools import fake_imagenet

    tree = tmp_path / "learnable"
    fake_imagenet.make(tree, classes=10, train_per_class=256, val_per_class=20, learnable=True, progress=False)
    done = rn50(tmp_path, "train=accuracy", f"precision={precision}", "data=imagefolder", f"data.root={tree}",
                "data.image_size=64", "data.batch_size=64", "train.epochs=10", "train.lr_warmup_epochs=1",
                "train.target_top1=0.95")
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = runs_in(tmp_path)
    assert run.data.params["model.num_classes"] == "10"
    assert run.info.status == "FINISHED" and run.data.tags["target_reached"] == "true", run.data.metrics
    assert run.data.metrics["val/best_top1"] >= 0.95
