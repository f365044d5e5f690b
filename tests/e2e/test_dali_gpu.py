"""data=dali against data=synthetic on one GPU (issue 44): the same run with the same settings, in one test,
so that a change which slows DALI's feed at rn50's defaults (0.979 of synthetic on an H200, 0.990 on an
H100: docs/benchmarks.md) fails here. Needs a CUDA GPU and DALI:
`python -m pytest -m gpu tests/e2e/test_dali_gpu.py` on a GPU machine."""

import importlib.util
import json

import pytest

from helpers.cli import rn50
from rn50.tools.fake_imagenet import make

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def cuda_and_dali() -> bool:
    try:
        if importlib.util.find_spec("nvidia.dali") is None:
            return False
    except ModuleNotFoundError:  # no nvidia package at all
        return False
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(not cuda_and_dali(), reason="needs a CUDA GPU and nvidia-dali")
def test_dali_keeps_up_with_synthetic_at_the_defaults(tmp_path):
    # 5,000 JPEGs of ImageNet's size: an epoch every 19 steps, so the window crosses epoch ends.
    make(tmp_path / "imagenet", classes=50, train_per_class=100, val_per_class=1)
    figures = {}
    for data in ("synthetic", "dali"):
        # the median of 3 windows, and the same 1000-class head for both (the tree's 50 folders would give dali 50)
        run = rn50(tmp_path, f"data={data}", f"data.root={tmp_path / 'imagenet'}", "bench.repeats=3",
                   "model.num_classes=1000", f"hydra.run.dir={data}")
        assert run.returncode == 0, run.stderr[-2000:]
        summary = json.loads((tmp_path / data / "summary.json").read_text())
        assert summary["train/loss_last"] < summary["train/loss_first"] and summary["train/skipped_steps_window"] == 0
        figures[data] = summary
    ratio = figures["dali"]["throughput/images_per_sec"] / figures["synthetic"]["throughput/images_per_sec"]
    print(f"dali {figures['dali']['throughput/images_per_sec']:.1f} / synthetic "
          f"{figures['synthetic']['throughput/images_per_sec']:.1f} = {ratio:.3f}; data wait "
          f"{figures['dali']['data/wait_pct']:.1f}%, {figures['dali']['cpu/cores_per_device']:.1f} CPU cores")
    assert ratio >= 0.97
