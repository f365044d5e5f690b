"""What answers without a run costs: no torch, no Lightning, no MLflow in the process."""

import json
import subprocess
import sys

import pytest

from helpers import ROOT, TINY

HEAVY = ("torch", "torchvision", "pytorch_lightning", "lightning", "lightning_fabric", "mlflow")
PROBE = """
import json, runpy, sys
sys.argv = ["rn50", *json.loads(sys.argv[1])]
try:
    runpy.run_module("rn50", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
print("RN50-MODULES", json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def modules_loaded(cwd, *args, env=None):
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(args))], cwd=cwd, capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT), "PATH": "", **(env or {})})
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RN50-MODULES"))
    return set(json.loads(line.split(" ", 1)[1])), proc


@pytest.mark.parametrize("args", [
    ["--help"],
    ["--cfg", "job"],
    ["dry_run=true"],
    ["cluster=torchrun", "dist=2n8g", "dry_run=true"],
    ["data.batch_size=0"],                      # a bad value
    ["model=resnet999"],                        # an unknown option
    ["data=imagefolder", "data.root=/nonexistent"],  # a missing data root
    ["mlflow.tracking_uri=http://127.0.0.1:9"],  # an unreachable tracking server
], ids=lambda a: " ".join(a))
def test_answers_without_a_run_import_no_torch_lightning_or_mlflow(tmp_path, args):
    loaded, proc = modules_loaded(tmp_path, *TINY, *args)
    assert not loaded & set(HEAVY), (sorted(loaded & set(HEAVY)), proc.stderr[-2000:])
    assert "rn50" in loaded


def test_the_cpu_profile_is_chosen_without_torch(tmp_path):
    """No GPU (CUDA_VISIBLE_DEVICES=""): device=auto composes the run again as device=cpu, in the launcher."""
    loaded, proc = modules_loaded(tmp_path, "dry_run=true", env={"CUDA_VISIBLE_DEVICES": ""})
    assert "no GPU on this host: the CPU profile (device=cpu)" in proc.stderr, proc.stderr[-2000:]
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_store_check_before_the_ranks_start_imports_no_mlflow(tmp_path):
    probe = ("import sys; from rn50 import tracking; "
             f"tracking.health.check_reachable('sqlite:///{tmp_path}/mlflow.db', open_store=False); "
             "print('mlflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.stdout.strip() == "False", done.stderr[-2000:]
    assert not (tmp_path / "mlflow.db").exists()
