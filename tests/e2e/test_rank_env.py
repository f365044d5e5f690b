"""What a fresh rank process sets before torch, CUDA and inductor read it (CUDA_DEVICE_MAX_CONNECTIONS, the lasting
compile cache), without importing torch early, and CUDA_DEVICE_MAX_CONNECTIONS as the bare loop's run sets it."""

import os
import subprocess
import sys

from helpers import ROOT

SHOW = "print('CUDA_DEVICE_MAX_CONNECTIONS', os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS'))"


def seen(code: str, given=None) -> list:
    """The value after each SHOW in code, run in a fresh process (given: the user's own value)."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    env.update(PYTHONPATH=str(ROOT), **({"CUDA_DEVICE_MAX_CONNECTIONS": given} if given else {}))
    done = subprocess.run([sys.executable, "-c", f"import os; {code}"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line.split()[1] for line in done.stdout.splitlines() if line.startswith("CUDA_DEVICE_MAX_CONNECTIONS ")]


def test_ranks_and_the_bare_loop_give_cuda_32_work_queues_unless_the_user_chose():
    assert seen(f"import rn50.rank.run; {SHOW}") == ["32"]  # a rank process, before its CUDA context
    assert seen(f"import rn50.rank.run; {SHOW}", given="4") == ["4"]
    # Set by the bare loop's run, not by importing it: one process shows both.
    bare = ("from rn50 import baseline; baseline.main(['--arch', 'resnet18', '--image-size', '32', "
            "'--batch-size', '2', '--warmup-steps', '1', '--steps', '1', '--precision', 'fp32'])")
    assert seen(f"import rn50.baseline; {SHOW}; {bare}; {SHOW}") == ["None", "32"]


def test_a_rank_compiles_into_the_lasting_cache_though_lightning_names_one_first(tmp_path):
    # Importing Lightning makes inductor set TORCHINDUCTOR_CACHE_DIR to its /tmp default; the rank's
    # process must name its own first, or every compile goes to a directory a reboot empties.
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    probe = ("import rn50.rank.run\n"
             "from torch._inductor.runtime.cache_dir_utils import cache_dir\n"
             "print(cache_dir())")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path / ".cache" / "rn50" / "torchinductor")


def test_the_rank_package_sets_its_variables_without_importing_torch(tmp_path):
    # `python -m rn50.rank` imports the package before rank/__main__.py's lasting_imports (rn50/measure/settings.py): what the
    # package's first import sets must not pull torch in outside them, or the collector scans its import.
    probe = "import sys, rn50.rank; print(sorted(m for m in ('torch', 'pynvml', 'pytorch_lightning') if m in sys.modules))"
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "CUDA_DEVICE_MAX_CONNECTIONS")}
    out = subprocess.run([sys.executable, "-c", probe], env={**env, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
