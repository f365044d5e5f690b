"""data=dali against data=synthetic on one GPU (issue 44): the same run with the same settings, in one test,
so that a change which slows DALI's feed fails here. Two settings: data=dali's defaults, chosen for hosts
whose every GPU decodes (the hardware decoder, 6 threads: 0.961 of synthetic on four H100s; on one H100 the
hardware decoder with 12 threads gave 0.967; with 6 threads one H200 gave 0.976 and 0.975), and the settings
conf/data/dali.yaml gives for one GPU with the host's cores to itself (0.988 on one H100):
docs/benchmarks.md, "DALI's levers on 4 GPUs". Each run is one 100-step window a repeat, three repeats. Needs a CUDA GPU and DALI:
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


ONE_GPU = ["data.dali.num_threads=12", "data.dali.hw_decoder_load=0", "data.dali.cpu_decode_share=0.25"]


@pytest.mark.skipif(not cuda_and_dali(), reason="needs a CUDA GPU and nvidia-dali")
def test_dali_keeps_up_with_synthetic_at_the_defaults(tmp_path):
    # 5,000 JPEGs of ImageNet's size: an epoch every 19 steps, so the window crosses epoch ends.
    make(tmp_path / "imagenet", classes=50, train_per_class=100, val_per_class=1)
    figures = {}
    for name, data, keys in (("synthetic", "synthetic", []), ("dali", "dali", []), ("one_gpu", "dali", ONE_GPU)):
        # the median of 3 windows, and the same 1000-class head for all (the tree's 50 folders would give dali 50)
        run = rn50(tmp_path, f"data={data}", f"data.root={tmp_path / 'imagenet'}", "bench.repeats=3",
                   "model.num_classes=1000", *keys, f"hydra.run.dir={name}")
        assert run.returncode == 0, run.stderr[-2000:]
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        # trained: the loss fell (a step the loss scaler skips now and then is reported, not a failure)
        assert summary["train/loss_last"] < summary["train/loss_first"], summary
        assert "gpu/jpeg_utilization_pct" in summary, "NVML gave no NVJPG counter: a GPU without JPEG decoders?"
        figures[name] = summary
    ratio = {}
    for name in ("dali", "one_gpu"):
        ratio[name] = figures[name]["throughput/images_per_sec"] / figures["synthetic"]["throughput/images_per_sec"]
        print(f"{name}: {figures[name]['throughput/images_per_sec']:.1f} / synthetic "
              f"{figures['synthetic']['throughput/images_per_sec']:.1f} = {ratio[name]:.3f}; data wait "
              f"{figures[name]['data/wait_pct']:.1f}%, {figures[name]['cpu/cores_per_device']:.1f} CPU cores, "
              f"hardware decoder {figures[name]['gpu/jpeg_utilization_pct']:.0f}% busy, "
              f"{figures[name]['train/skipped_steps_window']:.0f} steps skipped in the windows")
    # The hardware decoder's per-batch sync costs one GPU a little (0.967 with 12 threads; 0.97 is issue 44's
    # target, not met there); 0.95 leaves that and the 6 threads' unmeasured difference room. The one-GPU
    # settings met 0.97 (0.988).
    assert ratio["dali"] >= 0.95 and ratio["one_gpu"] >= 0.97
    assert figures["dali"]["gpu/jpeg_utilization_pct"] > 0 and figures["one_gpu"]["gpu/jpeg_utilization_pct"] == 0
