"""python -m rn50.doctor: is this node ready for `python -m rn50`? One line per check.

Runs before rn50's dependencies are complete: only the standard library is imported at the top,
and each dependency is imported inside its own check. A problem is one line with its fix; the
exit status is 1 when anything the default run needs is missing. GPUs, DALI and SLURM are
optional (a warning or a note) unless --gpu, --dali or --slurm asks for them.

    python -m rn50.doctor [--tracking-uri URI] [--gpu] [--dali] [--slurm]
"""

import argparse
import importlib
import os
import platform
import re
import shutil
import sqlite3
import sys
import uuid
from importlib import metadata
from pathlib import Path
from typing import List, NamedTuple, Optional

PROG = "rn50.doctor"
# Distribution name -> module to import, where they differ or the check needs a specific one.
IMPORT_NAMES = {
    "pytorch-lightning": "pytorch_lightning",
    "hydra-core": "hydra",
    "nvidia-ml-py": "pynvml",
    "hydra-submitit-launcher": "hydra_plugins.hydra_submitit_launcher",
}
# Not in pyproject's list, but cluster=slurm imports it (hydra-submitit-launcher's dependency).
ALSO_CHECKED = ["submitit"]
FIX_INSTALL = "pip install --no-index --find-links WHEELHOUSE 'rn50' (see the wheelhouse's INSTALL.txt)"


class Check(NamedTuple):
    status: str  # ok, FAIL (the default run needs it), warn (a problem it does not need), info
    name: str
    detail: str


def _ok(name, detail): return Check("ok", name, detail)
def _fail(name, detail, fix): return Check("FAIL", name, f"{detail}; fix: {fix}")
def _warn(name, detail, fix): return Check("warn", name, f"{detail}; fix: {fix}")
def _info(name, detail): return Check("info", name, detail)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# ---------------------------------------------------------------- Python, torch, GPUs

def check_python() -> Check:
    return _ok("python", f"{platform.python_version()} at {sys.executable}")


def check_torch(need_gpu: bool) -> List[Check]:
    try:
        torch = importlib.import_module("torch")  # a probe: the doctor reports a torch that does not import
    except Exception as exc:  # a broken CUDA library raises OSError, not ImportError
        fix = ("install the torch build for this node's CUDA (a site module, a container, or a wheel "
               "carried with the wheelhouse)")
        return [_fail("torch", f"cannot import torch ({_first_line(exc)})", fix)]
    cuda = torch.version.cuda
    cudnn = torch.backends.cudnn.version() if cuda else None
    checks = [_ok("torch", f"{torch.__version__}, CUDA {cuda or 'none (a CPU-only build)'}"
                           + (f", cuDNN {cudnn}" if cudnn else ""))]
    checks.append(check_gpus(torch, need_gpu))
    checks.append(check_nccl(torch))
    return checks


def _driver() -> tuple:
    """(driver version, highest CUDA version it supports) through NVML, or (None, None)."""
    try:
        pynvml = importlib.import_module("pynvml")  # a probe, as for torch
        pynvml.nvmlInit()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        return pynvml.nvmlSystemGetDriverVersion(), f"{cuda // 1000}.{cuda % 1000 // 10}"
    except Exception:  # no pynvml, or no NVIDIA driver on this host
        return None, None


def check_gpus(torch, need_gpu: bool) -> Check:
    driver, driver_cuda = _driver()
    on_driver = f", driver {driver} (CUDA {driver_cuda})" if driver else ""
    count = torch.cuda.device_count() if torch.version.cuda and torch.cuda.is_available() else 0
    if count:
        names = [torch.cuda.get_device_name(i) for i in range(count)]
        kinds = ", ".join(f"{names.count(n)} x {n}" for n in dict.fromkeys(names))
        return _ok("gpus", f"{kinds}{on_driver}")
    report = _fail if need_gpu else _warn
    if not torch.version.cuda:
        return report("gpus", "this torch has no CUDA: runs use the CPU",
                      "install a CUDA build of torch" + (f" for CUDA <= {driver_cuda}" if driver_cuda else ""))
    if driver_cuda and _version_tuple(driver_cuda) < _version_tuple(torch.version.cuda):
        return report("gpus", f"the driver {driver} supports CUDA {driver_cuda}, this torch needs "
                              f"{torch.version.cuda}", f"update the driver or install torch built for CUDA "
                                                       f"<= {driver_cuda}")
    return report("gpus", f"no CUDA GPU visible{on_driver}: the default run takes the CPU profile",
                  "check nvidia-smi, CUDA_VISIBLE_DEVICES and that the job was given GPUs")


def check_nccl(torch) -> Check:
    try:
        dist = importlib.import_module("torch.distributed")  # a probe, as for torch
        if dist.is_available() and dist.is_nccl_available():
            return _ok("nccl", ".".join(str(v) for v in torch.cuda.nccl.version()))
    except Exception as exc:
        return _warn("nccl", f"cannot read NCCL's version ({_first_line(exc)})",
                     "install a torch build with NCCL for multi-GPU runs")
    if not torch.version.cuda:
        return _info("nccl", "none in a CPU-only torch; DDP uses gloo")
    return _warn("nccl", "this torch has no NCCL: dist=1n2g and larger cannot run on GPUs",
                 "install a CUDA torch build with NCCL")


def _version_tuple(text: str) -> tuple:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:2])


# ---------------------------------------------------------------- rn50 and its dependencies

def rn50_requirements() -> List[str]:
    """rn50's run dependencies (no extras): pyproject.toml in a checkout, else the installed metadata."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"  # the checkout, above rn50/tools/
    if pyproject.is_file():
        text = pyproject.read_text()
        block = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", text, flags=re.S | re.M)
        if block:
            lines = [line.split("#", 1)[0] for line in block.group(1).splitlines()]
            return re.findall(r"\"([^\"]+)\"", "\n".join(lines))
    try:
        return [r for r in metadata.requires("rn50") or [] if "extra ==" not in r]
    except metadata.PackageNotFoundError:
        return []


def _specifier_check():
    """A function telling whether a version fits a PEP 440 specifier, where packaging is importable."""
    for module in ("packaging", "pip._vendor.packaging"):
        try:
            specifiers = importlib.import_module(f"{module}.specifiers")
            return lambda spec, version: specifiers.SpecifierSet(spec).contains(version, prereleases=True)
        except ImportError:
            continue
    return None


def check_rn50() -> Check:
    try:
        configs = Path(importlib.import_module("rn50.config.directory").config_dir())  # a probe of rn50 itself
        version = metadata.version("rn50") if _has_dist("rn50") else "from a checkout"
    except Exception as exc:
        return _fail("rn50", f"cannot import rn50 ({_first_line(exc)})", FIX_INSTALL)
    if not (configs / "config.yaml").is_file():
        return _fail("rn50", f"its configs are not at {configs}", "reinstall rn50 from a wheel built "
                                                                  "by python -m rn50.wheelhouse")
    return _ok("rn50", f"{version} at {Path(sys.modules['rn50'].__file__).parent}")


def _has_dist(name: str) -> bool:
    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def check_dependency(requirement: str, fits) -> Check:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*)", requirement)
    dist, spec = match.group(1), match.group(2).strip()
    module = IMPORT_NAMES.get(dist.lower(), dist.lower().replace("-", "_"))
    label = module.split(".")[-1]
    try:
        importlib.import_module(module)
    except Exception as exc:
        return _fail(label, f"cannot import {module} ({_first_line(exc)})", FIX_INSTALL)
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        return _ok(label, "imports (no version recorded)")
    if spec and fits and not fits(spec, version):
        return _fail(label, f"{dist} {version} is installed, rn50 needs {spec}",
                     f"install a {dist} that fits, e.g. from a wheelhouse built without {dist} in --have")
    return _ok(label, version)


# ---------------------------------------------------------------- DALI

def check_dali(need_dali: bool) -> Check:
    flavours = sorted(d.metadata["Name"] for d in metadata.distributions()
                      if re.fullmatch(r"nvidia[-_]dali[-_]cuda\d+", (d.metadata["Name"] or "").lower()))
    torch_cuda = _torch_cuda()
    wanted = f"dali-cuda{torch_cuda.split('.')[0]}0" if torch_cuda else "dali-cuda130"
    report = _fail if need_dali else _warn
    if not flavours:
        if need_dali:
            return _fail("dali", "NVIDIA DALI is not installed", f"pip install 'rn50[{wanted}]' (from the wheelhouse)")
        return _info("dali", f"not installed (only data=dali needs it: rn50[{wanted}])")
    if len(flavours) > 1:
        return report("dali", f"several DALI flavours installed ({', '.join(flavours)}); they share one package",
                      f"pip uninstall all but nvidia-{wanted}")
    try:
        version = importlib.import_module("nvidia.dali").__version__  # a probe, as for torch
    except Exception as exc:
        return report("dali", f"{flavours[0]} does not import ({_first_line(exc)})",
                      f"reinstall it: pip install 'rn50[{wanted}]'")
    dali_major = re.search(r"cuda(\d+)", flavours[0].lower()).group(1)[:-1]
    if torch_cuda and dali_major != torch_cuda.split(".")[0]:
        return report("dali", f"{flavours[0]} {version} is for CUDA {dali_major}, torch for CUDA {torch_cuda}",
                      f"pip uninstall {flavours[0]} and install 'rn50[{wanted}]'")
    return _ok("dali", f"{flavours[0]} {version}" + (f", matches torch's CUDA {torch_cuda}" if torch_cuda
                                                     else " (CPU pipeline: torch has no CUDA)"))


def _torch_cuda() -> Optional[str]:
    torch = sys.modules.get("torch")
    return getattr(getattr(torch, "version", None), "cuda", None)


# ---------------------------------------------------------------- MLflow

def check_tracking(uri: str) -> Check:
    """Can a run be recorded at uri? sqlite: the file (or its folder) is writable and opens;
    a server: it answers, and a throw-away experiment and run can be made and deleted there."""
    fix_uri = "give mlflow.tracking_uri=... (and --tracking-uri here) a store this node can write"
    if uri.startswith(("sqlite:///", "http://", "https://")):
        # Asked as a run asks (rn50.tracking's write probe, its client under its retry policy).
        try:
            from rn50 import tracking  # deferred: omegaconf or mlflow may be missing here
        except ImportError as exc:
            return _info("tracking", f"{uri}: not checked ({exc.name} is missing)")
        if uri.startswith("sqlite:///"):
            return _check_sqlite(uri, Path(tracking.health.sqlite_file(uri)), fix_uri, tracking)
        return _check_server(uri, fix_uri, tracking)
    if uri.startswith("file:") or "://" not in uri:
        folder = Path(uri[len("file://"):] if uri.startswith("file://") else uri)
        existing = next(p for p in [folder, *folder.parents] if p.exists())
        if os.access(existing, os.W_OK):
            return _ok("tracking", f"{uri}: writable")
        return _fail("tracking", f"{uri}: {existing} is not writable", fix_uri)
    return _info("tracking", f"{uri}: not checked (only sqlite:///, file: and http(s):// are)")


def _check_sqlite(uri: str, path: Path, fix: str, tracking) -> Check:
    folder = path.parent
    if not folder.is_dir():
        return _fail("tracking", f"{uri}: the folder {folder} does not exist", fix)
    refused = tracking.health.write_refused(str(path))  # as a run's check writes: sqlite's journal goes beside the file
    if refused:
        where, exc = refused
        return _fail("tracking", f"{uri}: {where} cannot be written ({exc.strerror})", fix)
    if not path.exists():
        return _ok("tracking", f"{uri}: writable; the first run creates it")
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error as exc:
        return _fail("tracking", f"{uri}: does not open as sqlite ({exc})", fix)
    if "experiments" not in tables:
        return _fail("tracking", f"{uri}: a sqlite file but not an MLflow store", fix)
    return _ok("tracking", f"{uri}: an MLflow store, writable")


def _check_server(uri: str, fix: str, tracking) -> Check:
    reason = tracking.client.server_unreachable(uri)
    if reason is not None:
        return _fail("tracking", f"{uri}: no answer ({reason})",
                     "start the server (launchers/mlflow_server.sh) or " + fix)
    try:
        client = tracking.client.open_client(uri)
        experiment = client.create_experiment(f"rn50-doctor-{uuid.uuid4().hex[:12]}")
        run = client.create_run(experiment)
        client.delete_run(run.info.run_id)
        client.delete_experiment(experiment)
    except Exception as exc:
        return _fail("tracking", f"{uri}: answers, but recording failed ({_first_line(exc)})", fix)
    return _ok("tracking", f"{uri}: answers; made and deleted a throw-away experiment and run")


# ---------------------------------------------------------------- SLURM

def check_slurm(need_slurm: bool) -> Check:
    commands = {name: shutil.which(name) for name in ("sbatch", "srun", "sinfo")}
    missing = [name for name, path in commands.items() if not path]
    if not missing:
        return _ok("slurm", f"sbatch, srun, sinfo in {Path(commands['sbatch']).parent}")
    if need_slurm:
        return _fail("slurm", f"{', '.join(missing)} not on PATH", "load SLURM's module or run on a login node")
    return _info("slurm", f"{', '.join(missing)} not on PATH (only cluster=slurm needs them)")


# ---------------------------------------------------------------- the report

def run_checks(args: argparse.Namespace) -> List[Check]:
    checks = [check_python(), *check_torch(args.gpu)]
    fits = _specifier_check()
    requirements = rn50_requirements()
    names = [re.match(r"[A-Za-z0-9._-]+", r).group(0).lower() for r in requirements]
    for requirement, name in zip(requirements, names):
        if name != "torch":  # checked above
            checks.append(check_dependency(requirement, fits))
    checks += [check_dependency(extra, fits) for extra in ALSO_CHECKED if extra not in names]
    checks += [check_rn50(), check_dali(args.dali), check_tracking(args.tracking_uri), check_slurm(args.slurm)]
    return checks


def report(checks: List[Check]) -> int:
    width = max(len(c.name) for c in checks)
    for check in checks:
        print(f"{check.status:<5} {check.name:<{width}}  {check.detail}")
    failed = [c.name for c in checks if c.status == "FAIL"]
    warned = [c.name for c in checks if c.status == "warn"]
    if failed:
        print(f"{PROG}: {len(failed)} problem(s) the default run needs fixed: {', '.join(failed)}")
        return 1
    print(f"{PROG}: ready for `python -m rn50`" + (f" (warnings: {', '.join(warned)})" if warned else ""))
    return 0


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__.split("\n")[0])
    parser.add_argument("--tracking-uri", default=f"sqlite:///{Path.cwd() / 'mlflow.db'}",
                        help="the MLflow store runs will use (default: sqlite:///mlflow.db here, as rn50's)")
    parser.add_argument("--gpu", action="store_true", help="fail when no CUDA GPU is usable")
    parser.add_argument("--dali", action="store_true", help="fail when DALI is missing or mismatched")
    parser.add_argument("--slurm", action="store_true", help="fail when sbatch, srun or sinfo is missing")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    sys.exit(report(run_checks(parse_args(argv))))


if __name__ == "__main__":
    main()
