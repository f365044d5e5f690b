"""How rn50.wheelhouse (rn50/tools/wheelhouse.py) gets its wheels: rn50's own, built from this checkout,
and its dependencies for the target, resolved and downloaded by this interpreter's pip (or built here
from a pure-Python sdist where a project publishes no wheel). Only the standard library is imported,
and wheel_target.py."""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from rn50.tools.wheel_target import (PLACEHOLDER, PROG, WheelhouseError, marker_environment, normalize,
                                     write_placeholders)

SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the checkout, above rn50/tools/
# What rn50's wheel is built from: the build runs on a copy, so the checkout gets no build/ folder.
SOURCE_ITEMS = ("pyproject.toml", "README.md", "rn50", "conf", "hydra_plugins")
# Network settings are kept; anything that changes what pip resolves is dropped.
PIP_NETWORK_VARIABLES = {"PIP_CERT", "PIP_CLIENT_CERT", "PIP_PROXY", "PIP_TRUSTED_HOST",
                         "PIP_DEFAULT_TIMEOUT", "PIP_TIMEOUT", "PIP_RETRIES", "PIP_CACHE_DIR",
                         "PIP_NO_CACHE_DIR"}
# Source files that mean an sdist compiles something: its wheel would only fit the build machine.
COMPILED_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".pyx", ".rs", ".f", ".f90", ".cu", ".go")

# pip evaluates environment markers (`; python_version < "3.12"`) against the interpreter it runs
# in, even under --python-version (pypa/pip#11198), so resolving for 3.12 from 3.11 would drop or
# add dependencies wrongly. This runs pip with packaging's marker environment set to the target's.
PIP_FOR_TARGET = """
import json, os, sys
from pip._vendor.packaging import markers
host, target = markers.default_environment, json.loads(os.environ["RN50_TARGET_MARKERS"])
markers.default_environment = lambda: {**host(), **target}
from pip._internal.cli.main import main
sys.exit(main())
"""


# ---------------------------------------------------------------- pip

def pip(args: Sequence[str], markers: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    """Run this interpreter's pip, free of this machine's pip config; markers: the target's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in PIP_NETWORK_VARIABLES}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    if markers is None:
        command = [sys.executable, "-m", "pip", *args]
    else:
        env["RN50_TARGET_MARKERS"] = json.dumps(markers)
        command = [sys.executable, "-c", PIP_FOR_TARGET, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True)


def _pip_failure(result: subprocess.CompletedProcess) -> str:
    """pip's own error lines, joined into one."""
    lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    errors = [line[len("ERROR: "):] for line in lines if line.startswith("ERROR: ")]
    return " ".join(errors or lines[-2:]) or f"pip exited with status {result.returncode}"


def build_rn50_wheel(dest: Path, index_url: str) -> Path:
    """rn50's own wheel, built from a copy of the source tree this module belongs to."""
    if not (SOURCE_ROOT / "pyproject.toml").is_file():
        raise WheelhouseError(f"rn50's source tree is not at {SOURCE_ROOT} (no pyproject.toml); "
                              f"run `python -m rn50.wheelhouse` from a checkout of rn50")
    with tempfile.TemporaryDirectory(prefix="rn50-src-") as tmp:
        for item in SOURCE_ITEMS:
            source = SOURCE_ROOT / item
            if source.is_dir():
                shutil.copytree(source, Path(tmp, item), ignore=shutil.ignore_patterns("__pycache__"))
            elif source.exists():
                shutil.copy2(source, Path(tmp, item))
        result = pip(["wheel", "--no-deps", "--index-url", index_url, *_reuse_setuptools(), "-w", str(dest), tmp])
    wheels = sorted(dest.glob("rn50-*.whl"))
    if result.returncode != 0 or not wheels:
        raise WheelhouseError(f"building rn50's wheel failed: {_pip_failure(result)}")
    return wheels[-1]


def _reuse_setuptools() -> List[str]:
    """--no-build-isolation where this Python's setuptools builds rn50 (>= 70.1 needs no `wheel`
    package): pip then skips installing setuptools into a fresh build environment, seconds each run."""
    try:
        version = tuple(int(p) for p in re.findall(r"\d+", metadata.version("setuptools"))[:2])
    except Exception:  # not installed, or an odd version string
        return []
    return ["--no-build-isolation"] if version >= (70, 1) else []


def wheel_metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return archive.read(name).decode()


def python_fits(python: str, requires: str) -> bool:
    """Whether major.minor meets a Requires-Python such as '>=3.10' or '>=3.9,!=3.11.*,<4'.
    Checked before pip, which otherwise walks rn50's dependencies first and takes a while to say so;
    a clause this does not read is left to pip."""
    have = tuple(int(p) for p in python.split("."))
    for clause in filter(None, (c.strip() for c in requires.split(","))):
        match = re.fullmatch(r"(~=|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)?)[\d.]*(\.\*)?", clause)
        if not match:
            continue
        op, version, wildcard = match.groups()
        want = tuple(int(p) for p in version.split("."))
        if wildcard and op in ("==", "!="):
            ok = (have[:len(want)] == want) == (op == "==")
        else:
            want += (0,) * (2 - len(want))
            ok = {"~=": have >= want, "==": have == want, "!=": have != want, "<=": have <= want,
                  ">=": have >= want, "<": have < want, ">": have > want}[op]
        if not ok:
            return False
    return True


# ---------------------------------------------------------------- resolving

class Target:
    def __init__(self, python: str, platforms: List[str], index_url: str, find_links: List[str]):
        self.python, self.platforms, self.index_url, self.find_links = python, platforms, index_url, find_links
        self.markers = marker_environment(python, platforms[0])

    def describe(self) -> str:
        return f"Python {self.python} on {self.platforms[0]}"

    def flags(self) -> List[str]:
        flags = ["--python-version", self.python, "--implementation", "cp", "--index-url", self.index_url]
        for tag in self.platforms:
            flags += ["--platform", tag]
        for folder in self.find_links:
            flags += ["--find-links", folder]
        return flags


def download(target: Target, requirement: str, have: Dict[str, str], work: Path) -> List[Path]:
    """Every wheel pip picks for `requirement` on the target, building pure-Python ones that the
    index has only as sources; the target's packages (have) are placeholders, left out of the result."""
    built, dl = work / "built", work / "download"
    constraints = write_placeholders(have, work / "have")
    local = ["--find-links", str(work / "have"), "--find-links", str(built), "-c", str(constraints)]
    tried = set()
    while True:
        result = pip(["download", "--only-binary=:all:", "--progress-bar", "off", *target.flags(), *local,
                      "-d", str(dl), requirement], markers=target.markers)
        if result.returncode == 0:
            return sorted(p for p in dl.glob("*.whl") if PLACEHOLDER not in p.name)
        # A dependency without a wheel for the target shows as "No matching distribution found for
        # REQ" or, found through a parent, as a ResolutionImpossible whose lines say "X depends on REQ".
        # One the target has is a version conflict instead, which _explain reports.
        output = result.stdout + result.stderr
        suspects = re.findall(r"No matching distribution found for (\S+)", output)
        suspects += [r.rstrip(";") for r in re.findall(r"^\s+\S+ [^ ]+ depends on (\S+)", output, flags=re.M)]
        unfound = [r for r in dict.fromkeys(suspects) if r not in tried and _name(r) not in have
                   and not _has_wheel(r, target, built, work)]
        if not unfound:
            raise WheelhouseError(_explain(result, target))
        for missing in unfound:
            tried.add(missing)
            build_from_source(missing, target, built, work / "sdist")


def _name(requirement: str) -> str:
    return normalize(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0))


def _has_wheel(requirement: str, target: Target, built: Path, work: Path) -> bool:
    """Whether the index (or a wheel built here) has a wheel of requirement for the target."""
    probe = pip(["download", "--no-deps", "--only-binary=:all:", "--progress-bar", "off", *target.flags(),
                 "--find-links", str(built), "-d", str(work / "probe"), requirement], markers=target.markers)
    return probe.returncode == 0


def _explain(result: subprocess.CompletedProcess, target: Target) -> str:
    """One line for a failed resolution; pip's whole output goes to a log file it names."""
    output = result.stdout + result.stderr
    log = Path(tempfile.gettempdir()) / "rn50-wheelhouse-pip.log"
    log.write_text(output)
    python = re.search(r"Package '([^']+)' requires a different Python: \S+ not in '([^']+)'", output)
    if python:
        return f"{python.group(1)} needs Python {python.group(2)}, not --python {target.python}"
    pinned = sorted(set(re.findall(r"\(constraint\) ([A-Za-z0-9._-]+)==([^\s+]+)\+?[^\s]*" + PLACEHOLDER, output)))
    if pinned:
        names = ", ".join(f"{name} {version.rstrip('.')}" for name, version in pinned)
        causes = "; ".join(line.strip() for line in re.findall(r"^\s+\S+ [^ ]+ depends on .*$", output, flags=re.M)[:3])
        return (f"the target's {names} (from --have) does not fit what rn50 needs ({causes}); drop "
                f"those lines from the --have file to carry wheels that fit (pip's output: {log})")
    if re.search(r"Could not fetch URL|Failed to establish|NewConnectionError|ProxyError", output):
        return f"cannot reach the index {target.index_url}; check the network or --index-url (pip's output: {log})"
    return f"{_pip_failure(result)} (pip's output: {log})"


def build_from_source(requirement: str, target: Target, built: Path, sdists: Path) -> Path:
    """The wheel of a dependency the index has no wheel of for the target: built here from its
    sdist when that is pure Python (antlr4-python3-runtime, which hydra-core needs, is one)."""
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0)
    folder = sdists / normalize(name)
    result = pip(["download", "--no-deps", "--no-binary", name, "--progress-bar", "off", *target.flags(),
                  "-d", str(folder), requirement])
    sources = sorted(folder.glob("*")) if result.returncode == 0 else []
    version = _sdist_version(sources[0]) if sources else None
    wheels = [f for f in index_files(target.index_url, name) if f.endswith(".whl")]
    others = [f for f in wheels if version is None or _wheel_version(f) == version]
    if others:
        raise WheelhouseError(
            f"no wheel of {name} {version or ''} for {target.describe()} on {target.index_url}; its wheels are "
            f"for {_summarize_tags(others)}: choose --python/--platform from those, or list {name} "
            f"in --have if the target has it".replace("  ", " "))
    if not sources:
        raise WheelhouseError(f"{requirement}: neither a wheel for {target.describe()} nor a source "
                              f"distribution on {target.index_url} ({_pip_failure(result)})")
    sdist = sources[0]
    compiled = _compiled_source(sdist)
    refuse = (f"{name} {version} is published only as source, and it is not pure Python ({{why}}): "
              f"build its wheel on a machine like the target ({target.describe()}) with "
              f"`pip wheel --no-deps '{name}=={version}' -w DIR` and pass DIR with --find-links DIR")
    if compiled:
        raise WheelhouseError(refuse.format(why=f"it has {compiled}"))
    print(f"{PROG}: building {sdist.name} (published only as source, pure Python)", file=sys.stderr)
    before = set(built.glob("*.whl"))
    result = pip(["wheel", "--no-deps", "--index-url", target.index_url, "-w", str(built), str(sdist)])
    new = sorted(set(built.glob("*.whl")) - before)
    if result.returncode != 0 or not new:
        raise WheelhouseError(f"building {sdist.name} failed: {_pip_failure(result)}")
    if not new[0].name.endswith("-none-any.whl"):
        new[0].unlink()
        raise WheelhouseError(refuse.format(why=f"its wheel built here is {new[0].name}"))
    return new[0]


def _sdist_version(sdist: Path) -> str:
    stem = re.sub(r"\.(tar\.gz|tar\.bz2|tgz|zip)$", "", sdist.name)
    return stem.rsplit("-", 1)[-1]


def _wheel_version(filename: str) -> str:
    return filename.split("-")[1]


def _summarize_tags(wheels: Sequence[str]) -> str:
    pythons = sorted({py for f in wheels for py in f[:-4].split("-")[-3].split(".")})
    platforms = sorted({p for f in wheels for p in f[:-4].split("-")[-1].split(".")})
    shown = ", ".join(platforms[:6]) + (f" and {len(platforms) - 6} more" if len(platforms) > 6 else "")
    return f"{', '.join(pythons)} on {shown}"


def _compiled_source(sdist: Path) -> Optional[str]:
    """The first file in an sdist that means compiling (C, C++, Cython, Rust, Fortran, CUDA, Go)."""
    try:
        if sdist.suffix == ".zip":
            names = zipfile.ZipFile(sdist).namelist()
        else:
            with tarfile.open(sdist) as archive:
                names = archive.getnames()
    except (OSError, tarfile.TarError, zipfile.BadZipFile):
        return None
    for member in names:
        if member.lower().endswith(COMPILED_SUFFIXES) or member.endswith("/Cargo.toml"):
            return member.split("/", 1)[-1]
    return None


def index_files(index_url: str, name: str) -> List[str]:
    """The file names the index lists for a project (PEP 691 JSON, else the PEP 503 HTML page)."""
    url = f"{index_url.rstrip('/')}/{normalize(name)}/"
    request = urllib.request.Request(
        url, headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            body, kind = response.read(), response.headers.get("Content-Type", "")
    except (OSError, urllib.error.URLError, ValueError):
        return []
    if "json" in kind:
        return [f["filename"] for f in json.loads(body).get("files", [])]
    return [urllib.parse.unquote(m) for m in re.findall(r"<a\b[^>]*>\s*([^<\s]+)\s*</a>", body.decode(errors="replace"))]
