"""rn50.wheelhouse: a real wheelhouse from the package index, installed with --no-index into a fresh
venv that already has torch, then the tiny benchmark and rn50.doctor run from that venv."""

import hashlib
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from helpers import ROOT, TINY
from helpers.store import empty_store_in, runs_in
from rn50.tools.wheel_files import split_file
from rn50.tools.wheel_resolve import Target, build_from_source
from rn50.tools.wheel_target import WheelhouseError, expand_platforms, host_platform
from rn50.tools.wheelhouse import DEFAULT_INDEX

# What the test wheelhouse carries: rn50's own dependencies, small and pure Python (mlflow's wheels
# are the largest, about 18 MB). Every other package in this venv goes to --have, as a site's torch.
CARRIED = {"hydra-core", "omegaconf", "antlr4-python3-runtime", "mlflow", "mlflow-skinny", "mlflow-tracing",
           "hydra-submitit-launcher", "submitit", "nvidia-ml-py"}
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
# No index, no config file, no find-links of this machine: only the wheelhouse can serve pip.
OFFLINE = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8",
           "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def wheelhouse(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "rn50.wheelhouse", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True)


def project(wheel_name: str) -> str:
    return re.sub(r"[-_.]+", "-", wheel_name.split("-")[0]).lower()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def torch_site(folder: Path, have: list) -> Path:
    """A folder of links to the packages of this venv named in have (torch, its CUDA libraries, ...),
    as a node's site-packages that has them and nothing else (not mlflow, hydra or rn50)."""
    folder.mkdir()
    names = {re.sub(r"[-_.]+", "-", line.split("==")[0]).lower() for line in have}
    for dist in metadata.distributions():
        if re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower() not in names:
            continue
        site = Path(dist.locate_file(""))
        for top in {f.parts[0] for f in dist.files or []}:
            if top not in ("..", "__pycache__") and not top.endswith(".pth") and (site / top).exists() \
                    and not (folder / top).exists():
                (folder / top).symlink_to(site / top)
    return folder


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """A wheelhouse built for this Python and platform, copied to a 'node', rejoined, checked and
    installed there with --no-index into a fresh venv whose site already has torch."""
    tmp = tmp_path_factory.mktemp("offline")
    freeze = subprocess.run([sys.executable, "-m", "pip", "list", "--format=freeze"], capture_output=True,
                            text=True, check=True).stdout.splitlines()
    have = [line for line in freeze if "==" in line
            and re.sub(r"[-_.]+", "-", line.split("==")[0]).lower() not in CARRIED | {"rn50"}]
    (tmp / "have.txt").write_text("\n".join(have) + "\n")
    built = wheelhouse(tmp / "wh", "--python", PYTHON, "--platform", host_platform(), "--extras", "dali-cuda130",
                       "--have", tmp / "have.txt", "--split-mb", 3)
    assert built.returncode == 0, built.stderr[-3000:]

    node = tmp / "node"
    shutil.copytree(tmp / "wh", node)
    install = (node / "INSTALL.txt").read_text()
    for line in install.splitlines():  # rejoin the parts and check the sums, as INSTALL.txt says
        if line.startswith(("cat ", "sha256sum ")):
            subprocess.run(["bash", "-c", line], cwd=node, check=True, capture_output=True)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "node-site.pth").write_text(f"{torch_site(tmp / 'node-site', have)}\n")
    command = re.search(r"^python -m pip install --no-index --find-links \. (.+)$", install, flags=re.M)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--find-links", ".",
                           command.group(1).strip("'")], cwd=node, env=OFFLINE, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"tmp": tmp, "wh": tmp / "wh", "node": node, "venv": venv, "built": built, "install": proc, "have": have}


@pytest.mark.slow
def test_wheelhouse_carries_what_the_target_lacks(offline):
    wh = offline["wh"]
    files = sorted(p.name for p in wh.iterdir())
    whole = {line.split()[1] for line in (wh / "SHA256SUMS").read_text().splitlines()}
    assert {project(name) for name in whole} == CARRIED | {"rn50"}
    assert "antlr4_python3_runtime-4.9.3-py3-none-any.whl" in whole  # built here: PyPI has only its sdist
    parts = [f for f in files if ".part-" in f]
    assert parts and all(f.startswith("mlflow") for f in parts)  # the files over 3 MB
    assert all(p.stat().st_size <= 3_000_000 for p in wh.glob("*.part-*"))
    assert not any("rn50have" in f or f.startswith("torch") for f in files)
    # Every file of SHA256SUMS is on the node again, whole, after the INSTALL.txt steps.
    assert sorted(p.name for p in offline["node"].glob("*.whl")) == sorted(whole)
    out = offline["built"].stdout
    assert "largest wheels:" in out and re.search(r"\d+ wheels, [\d.]+ MB", out)
    install = (wh / "INSTALL.txt").read_text()
    assert "--no-index --find-links . 'rn50[dali-cuda130]'" in install and "--target" in install
    assert "python -m rn50.doctor" in install


@pytest.mark.slow
def test_offline_install_runs_the_benchmark(offline, tmp_path):
    installed = offline["install"].stdout
    assert "Successfully installed" in installed and "rn50-0.1.0" in installed
    assert "outside environment" not in installed  # it needed nothing the node has in another version
    python = str(offline["venv"] / "bin" / "python")
    where = subprocess.run([python, "-c", "import rn50, torch; print(rn50.__file__); print(torch.__file__)"],
                           env=OFFLINE, capture_output=True, text=True, cwd=tmp_path)
    rn50_file, torch_file = where.stdout.split()
    assert rn50_file.startswith(str(offline["venv"])) and "node-site" in torch_file
    empty_store_in(tmp_path)
    run = subprocess.run([python, "-m", "rn50", *TINY], env=OFFLINE, capture_output=True, text=True,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    (finished,) = runs_in(tmp_path)
    assert finished.info.status == "FINISHED" and finished.data.metrics["throughput/images_per_sec"] > 0


@pytest.mark.slow
def test_doctor_passes_in_the_offline_venv(offline, tmp_path):
    doctor = subprocess.run([str(offline["venv"] / "bin" / "python"), "-m", "rn50.doctor"], env=OFFLINE,
                            capture_output=True, text=True, cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    for name in ("torch", "hydra", "omegaconf", "mlflow", "pynvml", "submitit", "rn50", "tracking"):
        assert re.search(rf"^ok\s+{name}\s", doctor.stdout, flags=re.M), doctor.stdout
    assert "ready for `python -m rn50`" in doctor.stdout


def test_split_parts_rejoin_to_the_same_sha256(tmp_path):
    data = os.urandom(2_500_000)
    whole = tmp_path / "big.whl"
    whole.write_bytes(data)
    parts = split_file(whole, 1_000_000)
    assert [p.name for p in parts] == ["big.whl.part-aa", "big.whl.part-ab", "big.whl.part-ac"]
    assert [p.stat().st_size for p in parts] == [1_000_000, 1_000_000, 500_000] and not whole.exists()
    subprocess.run("cat big.whl.part-* > big.whl", shell=True, cwd=tmp_path, check=True)
    assert sha256(whole) == hashlib.sha256(data).hexdigest()


def test_many_parts_keep_their_order(tmp_path):
    whole = tmp_path / "f"
    whole.write_bytes(bytes(range(256)) * 3)  # 768 parts of 1 byte: more than 26 x 26, so 3 letters
    parts = split_file(whole, 1)
    assert len(parts) == 768 and parts[0].name == "f.part-aaa" and parts[-1].name.endswith("bdn")
    subprocess.run("cat f.part-* > f", shell=True, cwd=tmp_path, check=True)
    assert whole.read_bytes() == bytes(range(256)) * 3


@pytest.mark.parametrize("args, says", [
    (["--platform", "manylinux_2_28_x86-64"], "--platform manylinux_2_28_x86-64: not a platform tag pip knows; "
                                              "for example manylinux_2_28_x86_64"),
    (["--platform", "linux"], "--platform linux: not a platform tag"),
    (["--python", "3"], "--python 3: give the target's major.minor version, for example 3.12"),
    (["--have", "/nonexistent/have.txt"], "--have /nonexistent/have.txt: cannot read it"),
    (["--split-mb", "0"], "--split-mb 0: give a size in MB above 0"),
])
def test_bad_input_is_one_line(tmp_path, args, says):
    proc = wheelhouse(tmp_path / "out", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"rn50.wheelhouse: error: {says}"), proc.stderr
    assert not (tmp_path / "out").exists()


def test_have_line_without_a_version_is_named(tmp_path):
    (tmp_path / "have.txt").write_text("numpy==2.1.0\n# a comment\n-e git+https://example.org/x#egg=x\n"
                                       "torch @ git+https://github.com/pytorch/pytorch\n")
    proc = wheelhouse(tmp_path / "out", "--have", tmp_path / "have.txt")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"rn50.wheelhouse: error: --have {tmp_path / 'have.txt'}, line 4: "
                                  "'torch @ git+https://github.com/pytorch/pytorch' names no version")


@pytest.mark.slow
def test_python_the_project_does_not_support_is_one_line(tmp_path):
    proc = wheelhouse(tmp_path / "out", "--python", "3.9", "--platform", "manylinux_2_28_x86_64")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "rn50.wheelhouse: error: rn50 needs Python >=3.10, not --python 3.9"


@pytest.mark.slow
def test_platform_without_a_wheel_names_the_dependency_and_what_has_one(tmp_path):
    # nvidia-dali-cuda130 has no musllinux wheel and no sdist; every other package is on the "node".
    freeze = subprocess.run([sys.executable, "-m", "pip", "list", "--format=freeze"], capture_output=True,
                            text=True, check=True).stdout
    (tmp_path / "have.txt").write_text("\n".join(l for l in freeze.splitlines() if "dali" not in l) + "\n")
    proc = wheelhouse(tmp_path / "out", "--platform", "musllinux_1_2_x86_64", "--extras", "dali-cuda130",
                      "--have", tmp_path / "have.txt")
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"rn50.wheelhouse: error: no wheel of nvidia-dali-cuda130 for Python {PYTHON} on "
                           "musllinux_1_2_x86_64"), proc.stderr
    assert "manylinux" in line and "--platform" in line


def test_a_compiled_sdist_only_dependency_is_refused(tmp_path):
    # pycrypto 2.6.1 is on PyPI only as source, with C files: a wheel built here fits only this machine.
    target = Target(PYTHON, expand_platforms(["manylinux_2_28_x86_64"]), DEFAULT_INDEX, [])
    with pytest.raises(WheelhouseError) as error:
        build_from_source("pycrypto==2.6.1", target, tmp_path / "built", tmp_path / "sdist")
    assert str(error.value).startswith("pycrypto 2.6.1 is published only as source, and it is not pure Python "
                                       "(it has src/")
    assert "pip wheel --no-deps 'pycrypto==2.6.1' -w DIR` and pass DIR with --find-links DIR" in str(error.value)
    assert not (tmp_path / "built").exists()
