"""train=accuracy's pieces: top-k counting, the recipe's schedule and weight decay, bad input refused
before any run, and the per-epoch line. Real training runs: tests/e2e/test_accuracy_runs.py."""

import pytest
import torch

from helpers.images import make_tree
from rn50.launcher import launch
from rn50.recipe import accuracy, schedule
from rn50.results import resume
from rn50 import tracking
from rn50.errors import ConfigError

def test_top_k_by_hand():
    logits = torch.tensor([
        [0.1, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0],  # label 1: top-1
        [0.9, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6],  # label 1: ranked 7th of 7, in no top-5
        [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6],  # label 2: ranked 5th, in the top-5 only
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],  # label 6: top-1
    ])
    labels = torch.tensor([1, 1, 2, 6])
    counts = accuracy.count_correct(logits, labels)
    assert counts.tolist() == [2, 3, 4]
    assert accuracy.fractions(counts) == {"top1": 0.5, "top5": 0.75, "images": 4}
    # Fewer classes than k: the label is always among the k best.
    assert accuracy.count_correct(logits[:3, :3], torch.tensor([1, 1, 2])).tolist() == [2, 3, 3]


def test_recipe_schedule_and_weight_decay(compose_cfg):
    from rn50.recipe.optimizers import param_groups
    from torchvision.models import resnet18

    assert schedule.scaled_lr(0.256, 2048) == pytest.approx(2.048)
    factors = [schedule.lr_factor(s, warmup_steps=4, total_steps=12) for s in range(12)]
    assert factors[:4] == [0.25, 0.5, 0.75, 1.0]
    assert factors[4] == 1.0 and factors[8] == pytest.approx(0.5) and factors[11] < 0.05
    decayed, free = param_groups(resnet18(), 1e-4)
    assert decayed["weight_decay"] == 1e-4 and free["weight_decay"] == 0.0
    assert all(p.dim() > 1 for p in decayed["params"]) and all(p.dim() == 1 for p in free["params"])
    cfg = compose_cfg(["train=accuracy"])
    assert (cfg.train.epochs, cfg.train.target_top1, cfg.optim.lr, cfg.optim.momentum) == (50, 0.759, 0.256, 0.875)


# Composed outside a Hydra job, ${hydra:runtime.cwd} in the default tracking URI cannot resolve.
SETTLED = ["train=accuracy", "dist.accelerator=cpu", "precision=fp32", "mlflow.tracking_uri=sqlite:///unused.db"]


def test_bad_input_is_refused_before_any_run(compose_cfg, tmp_path):
    def refused(overrides, match, out=tmp_path / "out"):
        cfg = compose_cfg([*SETTLED, "data.batch_size=2", *overrides])
        with pytest.raises(ConfigError, match=match):
            run = launch.preflight(cfg).cfg
            resume.run_to_continue(run, out, tracking.runs.config_params(run))

    tree = make_tree(tmp_path / "tree")
    refused([], r"data=synthetic is random; use data=imagefolder or data=dali")
    refused(["data=imagefolder", f"data.root={tree}", "train.target_top1=1.5"], r"train\.target_top1=1\.5 is out of")
    refused(["data=imagefolder", f"data.root={tree}", "train.target_top1=0"], r"train\.target_top1=0\.0 is out of")
    no_val = make_tree(tmp_path / "no_val")
    (no_val / "val" / "n00000000" / "n00000000_0.JPEG").unlink()
    for folder in (no_val / "val").iterdir():
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
    (no_val / "val").rmdir()
    refused(["data=imagefolder", f"data.root={no_val}"], r"has no val/ folder")
    (tree / "val" / "n00000002").rename(tree / "val" / "cats")
    refused(["data=imagefolder", f"data.root={tree}"], r"val/ classes differ from train/ \(missing in val/: n00000002; "
                                                        r"not in train/: cats\)")
    (tree / "val" / "cats").rename(tree / "val" / "n00000002")
    refused(["data=imagefolder", f"data.root={tree}", "train.resume=true"], r"checkpoints/last\.ckpt does not exist")
    out = tmp_path / "out"
    (out / "checkpoints").mkdir(parents=True)
    torch.save({"epoch": 1, "state_dict": {"w": torch.ones(4096)}}, out / "checkpoints" / "last.ckpt")
    cfg = compose_cfg([*SETTLED, "data.batch_size=2", "data=imagefolder", f"data.root={tree}", "model=resnet18"])
    cfg = launch.preflight(cfg).cfg  # as a run remembers its params: decided (model.num_classes follows the folders)
    resume.remember(out, "run123", tracking.runs.config_params(cfg))
    refused(["data=imagefolder", f"data.root={tree}", "train.resume=true"],
            r"the checkpoint in .* was trained with model\.arch=resnet18, not model\.arch=resnet50")
    # A checkpoint from before a key existed (data._target_, model.autotune_*) still resumes.
    older = {k: v for k, v in tracking.runs.config_params(cfg).items() if k != "data._target_" and "autotune" not in k}
    resume.remember(out, "run123", older)
    resumed = compose_cfg([*SETTLED, "data.batch_size=2", "data=imagefolder", f"data.root={tree}", "model=resnet18",
                           "train.resume=true"])
    resumed = launch.preflight(resumed).cfg
    assert resume.run_to_continue(resumed, out, tracking.runs.config_params(resumed)) == "run123"
    # A checkpoint from before issue 28 moved the options' classes (data._target_=rn50.pipelines.ImageFolder).
    moved = {k: v.replace("rn50.options.", "rn50.") if k.endswith("._target_") else v
             for k, v in tracking.runs.config_params(cfg).items()}
    assert moved["data._target_"] == "rn50.pipelines.ImageFolder"
    resume.remember(out, "run123", moved)
    assert resume.run_to_continue(resumed, out, tracking.runs.config_params(resumed)) == "run123"
    # A checkpoint cut short (a full disk, a copy stopped halfway) is refused before anything starts, by name.
    last = out / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:10_000])
    with pytest.raises(ConfigError, match=rf"^train\.resume=true: {last} is damaged \(not a whole checkpoint: .*\); "
                                          r"resume from a copy of it that is whole, or start afresh: drop "
                                          r"train\.resume, or give hydra\.run\.dir a new directory$"):
        resume.run_to_continue(resumed, out, tracking.runs.config_params(resumed))
    last.write_bytes(b"")
    with pytest.raises(ConfigError, match=r"is damaged \(not a whole checkpoint: File is not a zip file\)"):
        resume.run_to_continue(resumed, out, tracking.runs.config_params(resumed))


def test_progress_is_one_line_per_epoch_off_a_terminal_and_a_bar_on_one():
    import io
    from types import SimpleNamespace

    from rn50.rank.progress import EpochProgress

    row = {"epoch": 3, "train/loss": 2.3456, "val/top1": 0.456, "val/top5": 0.701,
           "train/images_per_sec": 2345.0, "time/epoch_s": 56.0}
    record = SimpleNamespace(history=[row])
    trainer = SimpleNamespace(is_global_zero=True, current_epoch=2, num_training_batches=10)
    plain = io.StringIO()
    progress = EpochProgress(50, record, stream=plain, tty=False)
    progress.on_train_start(trainer, None)
    progress.on_train_epoch_start(trainer, None)
    progress.on_train_batch_end(trainer, None, {"loss": torch.tensor(2.0)}, None, 0)
    progress.on_train_epoch_end(trainer, None)
    assert plain.getvalue() == ("rn50: epoch 3/50: loss 2.346, top-1 45.60%, top-5 70.10%, "
                                "2,345 images/sec, 56 s\n")
    bar = io.StringIO()
    progress = EpochProgress(50, record, stream=bar, tty=True)
    progress.on_train_start(trainer, None)
    progress.on_train_epoch_start(trainer, None)
    progress.on_train_epoch_end(trainer, None)
    assert bar.getvalue().startswith("\rrn50: epoch 3/50 [") and "loss 2.346, top-1 45.60%" in bar.getvalue()
    assert bar.getvalue().endswith("\n")
