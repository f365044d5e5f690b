"""A real Lightning fit in a fresh process, as a rank runs one: no dependency noise, rn50's warning kept,
everything with RN50_VERBOSE=1."""

import os
import shutil
import subprocess
import sys

from helpers import ROOT, TESTS


# A real Lightning fit in a fresh process, as a rank runs one; then a warning rn50 means to show.
FIT = """
from rn50.console import quiet, cpu_precision_warning
quiet()
import pytorch_lightning as pl

from helpers.tiny_module import Tiny

pl.Trainer(accelerator="cpu", max_steps=2, logger=False, enable_checkpointing=False,
           enable_progress_bar=False, enable_model_summary=False).fit(Tiny(8))
from rn50.options.precision import Amp
cpu_precision_warning(Amp(), "cpu")
"""


NOISE = ("💡 Tip", "litlogger", "GPU available:", "TPU available:", "LeafSpec", "`Trainer.fit` stopped",
         # Lightning prints this hint only on hosts with SLURM's srun (CI installs SLURM).
         *(["The `srun` command is available"] if shutil.which("srun") else []))


def fit(verbose: bool) -> str:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}"}
    env.pop("RN50_VERBOSE", None)
    if verbose:
        env["RN50_VERBOSE"] = "1"
    proc = subprocess.run([sys.executable, "-c", FIT], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_a_fit_shows_no_dependency_noise_but_rn50s_warning_and_verbose_shows_all():
    quiet_out, verbose_out = fit(verbose=False), fit(verbose=True)
    # The verbose run proves Lightning and torch print these lines in this environment.
    assert all(line in verbose_out for line in NOISE), verbose_out
    assert not [line for line in NOISE if line in quiet_out], quiet_out
    for out in (quiet_out, verbose_out):
        assert "precision=amp on the CPU: fp16 autocast is slow on CPUs" in out
        assert "precision=fp32" in out and "bf16" in out
