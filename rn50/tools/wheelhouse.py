"""python -m rn50.wheelhouse OUT: every wheel that installing rn50 offline needs, for another machine.

Run it where the package index is reachable; copy OUT to a node without internet and follow
OUT/INSTALL.txt there (`pip install --no-index --find-links . 'rn50[EXTRAS]'`). The target is given
as a Python version and platform tag, so the wheels may be for another Python than this one.

    python -m rn50.wheelhouse OUT --python 3.12 --platform manylinux_2_28_x86_64 \\
        --extras dali-cuda130 [--have have.txt] [--split-mb N]

--have takes `pip freeze` (or `pip list --format=freeze`) of the target: those packages, such as
a site's torch, are left out and never downloaded. pip does the resolving; this module gives it
a tiny placeholder wheel `NAME-VERSION+rn50have-py3-none-any.whl` without dependencies for each
package the target has, pinned by a constraints file, and drops the placeholders afterwards.

Only the standard library is imported: this runs on machines without rn50's dependencies.
pip runs with no config files (PIP_CONFIG_FILE=/dev/null) and without the PIP_* variables that
change what it resolves, so a local find-links folder or constraints file of this machine
cannot leak into the wheelhouse; it asks --index-url (PyPI by default) and nothing else.
"""

import argparse
import base64
import hashlib
import json
import os
import platform
import re
import shlex
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

PROG = "rn50.wheelhouse"
PLACEHOLDER = "rn50have"
DEFAULT_INDEX = "https://pypi.org/simple"
SOURCE_ROOT = Path(__file__).resolve().parents[2]  # the checkout, above rn50/tools/
# What rn50's wheel is built from: the build runs on a copy, so the checkout gets no build/ folder.
SOURCE_ITEMS = ("pyproject.toml", "README.md", "rn50", "conf", "hydra_plugins")
MB = 1_000_000
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

LINUX_ARCHES = {"x86_64", "i686", "aarch64", "ppc64le", "s390x", "armv7l", "riscv64"}
MAC_ARCHES = {"x86_64", "arm64", "universal2", "intel", "universal"}
WINDOWS_MACHINES = {"win32": "x86", "win_amd64": "AMD64", "win_arm64": "ARM64"}
LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
PLATFORM_EXAMPLES = ("manylinux_2_28_x86_64 (glibc 2.28 or newer), manylinux_2_17_aarch64, "
                     "musllinux_1_2_x86_64, macosx_11_0_arm64, win_amd64")


class WheelhouseError(Exception):
    """Bad input or an impossible target; the message names it and says what would work."""


def normalize(name: str) -> str:
    """The PEP 503 form of a project name: what pip compares."""
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------- the target

def expand_platforms(tags: Sequence[str]) -> List[str]:
    """Every platform tag a machine of the given tags installs: pip matches tags exactly.

    manylinux_2_28_x86_64 also runs manylinux_2_27 ... manylinux_2_5 wheels and their legacy
    names manylinux2014 (2_17), manylinux2010 (2_12) and manylinux1 (2_5); musllinux likewise.
    """
    out: List[str] = []
    for tag in tags:
        for expanded in _expand_platform(tag):
            if expanded not in out:
                out.append(expanded)
    return out


def _expand_platform(tag: str) -> List[str]:
    bad = WheelhouseError(f"--platform {tag}: not a platform tag pip knows; for example {PLATFORM_EXAMPLES}")
    legacy = re.fullmatch(r"(manylinux1|manylinux2010|manylinux2014)_(\w+)", tag)
    many = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", tag)
    musl = re.fullmatch(r"musllinux_(\d+)_(\d+)_(\w+)", tag)
    if legacy or many:
        major, minor = LEGACY_MANYLINUX[legacy.group(1)] if legacy else (int(many.group(1)), int(many.group(2)))
        arch = (legacy or many).groups()[-1]
        if arch not in LINUX_ARCHES or major != 2:
            raise bad
        oldest = 5 if arch in ("x86_64", "i686") else 17
        tags = []
        for glibc in range(minor, oldest - 1, -1):
            tags.append(f"manylinux_2_{glibc}_{arch}")
            for name, version in LEGACY_MANYLINUX.items():
                if version == (2, glibc) and (glibc == 17 or arch in ("x86_64", "i686")):
                    tags.append(f"{name}_{arch}")
        return tags
    if musl:
        major, minor, arch = int(musl.group(1)), int(musl.group(2)), musl.group(3)
        if arch not in LINUX_ARCHES or major != 1:
            raise bad
        return [f"musllinux_1_{m}_{arch}" for m in range(minor, 0, -1)]
    linux = re.fullmatch(r"linux_(\w+)", tag)
    mac = re.fullmatch(r"macosx_\d+_\d+_(\w+)", tag)
    if (linux and linux.group(1) in LINUX_ARCHES) or (mac and mac.group(1) in MAC_ARCHES) \
            or tag in WINDOWS_MACHINES or tag == "any":
        return [tag]
    raise bad


def marker_environment(python: str, platform_tag: str) -> Dict[str, str]:
    """The values of PEP 508 environment markers on the target."""
    env = {"python_version": python, "python_full_version": f"{python}.0",
           "implementation_name": "cpython", "implementation_version": f"{python}.0",
           "platform_python_implementation": "CPython"}
    if platform_tag in WINDOWS_MACHINES:
        env.update(sys_platform="win32", platform_system="Windows", os_name="nt",
                   platform_machine=WINDOWS_MACHINES[platform_tag])
    elif platform_tag.startswith("macosx"):
        env.update(sys_platform="darwin", platform_system="Darwin", os_name="posix",
                   platform_machine=platform_tag.rsplit("_", 1)[1])
    elif platform_tag != "any":
        linux = re.fullmatch(r"(?:many|musl)?linux(?:1|2010|2014|_\d+_\d+)?_(\w+)", platform_tag)
        env.update(sys_platform="linux", platform_system="Linux", os_name="posix",
                   platform_machine=linux.group(1))
    return env


def host_platform() -> str:
    """This machine's manylinux tag (its glibc and machine), the default --platform on Linux."""
    libc, version = platform.libc_ver()
    if sys.platform.startswith("linux") and libc == "glibc" and version:
        major, minor = version.split(".")[:2]
        return f"manylinux_{major}_{minor}_{platform.machine()}"
    raise WheelhouseError("--platform is needed on this machine; for example " + PLATFORM_EXAMPLES)


# ---------------------------------------------------------------- --have

def read_have(path: str) -> Dict[str, str]:
    """{normalized name: version} from `pip freeze` or `pip list --format=freeze` output."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise WheelhouseError(f"--have {path}: cannot read it ({exc.strerror or exc}); give the output of "
                              f"`python -m pip list --format=freeze` run on the target") from exc
    have = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("-") else ""
        if not line:
            continue  # comments, blank lines, and -e/-r/--option lines (editable checkouts)
        pinned = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*===?\s*(\S+)", line)
        direct = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*@\s*(\S+)", line)
        version = pinned.group(2) if pinned else _version_from_url(direct.group(2)) if direct else None
        if not version:
            raise WheelhouseError(
                f"--have {path}, line {number}: {line!r} names no version; give the output of "
                f"`python -m pip list --format=freeze` run on the target, which has NAME==VERSION lines")
        have[normalize((pinned or direct).group(1))] = version
    have.pop("rn50", None)  # rn50 itself always comes from this checkout
    return have


def _version_from_url(url: str) -> Optional[str]:
    """The version in a `NAME @ file:///.../NAME-VERSION-....whl` line of pip freeze."""
    filename = urllib.parse.unquote(url.rsplit("/", 1)[-1])
    match = re.fullmatch(r"[^-]+-([^-]+)(-.*\.whl|\.tar\.gz|\.zip)", filename)
    return match.group(1) if match else None


def placeholder_version(version: str) -> str:
    return f"{version}.{PLACEHOLDER}" if "+" in version else f"{version}+{PLACEHOLDER}"


def write_placeholders(have: Dict[str, str], folder: Path) -> Path:
    """A dependency-free wheel per package the target has, and constraints pinning each to it."""
    folder.mkdir(parents=True, exist_ok=True)
    pins = []
    for name, version in sorted(have.items()):
        version = placeholder_version(version)
        dist = f"{re.sub(r'[-_.]+', '_', name)}-{version.replace('-', '_')}"
        files = {
            f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                          f"Summary: on the target already (rn50.wheelhouse --have)\n",
            f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: {PROG}\nRoot-Is-Purelib: true\n"
                                       f"Tag: py3-none-any\n",
        }
        record = [f"{path},sha256={_urlsafe_sha256(text.encode())},{len(text.encode())}"
                  for path, text in files.items()] + [f"{dist}.dist-info/RECORD,,"]
        files[f"{dist}.dist-info/RECORD"] = "\n".join(record) + "\n"
        with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as wheel:
            for path, text in files.items():
                wheel.writestr(path, text)
        pins.append(f"{name}=={version}")
    constraints = folder / "constraints.txt"
    constraints.write_text("".join(pin + "\n" for pin in pins))
    return constraints


def _urlsafe_sha256(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


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


# ---------------------------------------------------------------- the wheelhouse

def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def split_file(path: Path, part_bytes: int) -> List[Path]:
    """Cut path into path.part-aa, .part-ab, ... of part_bytes each (as `split -b` names them),
    so `cat path.part-* > path` rejoins it; the original is removed."""
    size = path.stat().st_size
    count = -(-size // part_bytes)
    width = 2
    while 26 ** width < count:
        width += 1
    parts = []
    with open(path, "rb") as source:
        for index in range(count):
            suffix, n = "", index
            for _ in range(width):
                n, letter = divmod(n, 26)
                suffix = chr(ord("a") + letter) + suffix
            part = path.with_name(f"{path.name}.part-{suffix}")
            with open(part, "wb") as out:
                remaining = part_bytes
                while remaining:
                    block = source.read(min(remaining, 1 << 20))
                    if not block:
                        break
                    out.write(block)
                    remaining -= len(block)
            parts.append(part)
    path.unlink()
    return parts


def install_text(requirement: str, split: Dict[str, List[str]], summary: str, command: str) -> str:
    """INSTALL.txt: the commands to run on the target, in order."""
    req = shlex.quote(requirement)
    steps = []
    if split:
        steps.append(["# Rejoin the files that were cut into parts"] + [
            f"cat {shlex.quote(name)}.part-* > {shlex.quote(name)} && rm {shlex.quote(name)}.part-*"
            for name in sorted(split)])
    steps += [
        ["# Check every file against its SHA-256 (each line must say OK)", "sha256sum -c SHA256SUMS"],
        ["# Install with the Python that has torch (its venv, a site module's or a container's);",
         "# nothing is fetched from the network",
         f"python -m pip install --no-index --find-links . {req}",
         "#   where that Python's site-packages is read-only, either make a venv that sees its packages",
         "#   and use ~/rn50-venv/bin/python from here on:",
         "python -m venv --system-site-packages ~/rn50-venv",
         f"~/rn50-venv/bin/python -m pip install --no-index --find-links . {req}",
         "#   or install every wheel here into a folder of your own and put it on PYTHONPATH:",
         "python -m pip install --no-index --no-deps --target ~/rn50-site ./*.whl",
         "export PYTHONPATH=~/rn50-site${PYTHONPATH:+:$PYTHONPATH}"],
        ["# Check the node: Python, torch, CUDA, GPUs, NCCL, each dependency, MLflow, SLURM",
         "python -m rn50.doctor"],
        ["# Run the benchmark", "python -m rn50"],
    ]
    lines = [f"# {summary}", f"# Made by: {command}", "", "# On the target, in this folder:", ""]
    for number, (title, *commands) in enumerate(steps, 1):
        lines += [title.replace("# ", f"# {number}. ", 1), *commands, ""]
    return "\n".join(lines)


def build(out: Path, python: str, platforms: List[str], extras: List[str], have_file: Optional[str],
          split_mb: Optional[float], index_url: str, find_links: List[str], command: str) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise WheelhouseError(f"{out} exists and is not an empty folder; give a new or empty one")
    if not re.fullmatch(r"3\.\d{1,2}", python):
        raise WheelhouseError(f"--python {python}: give the target's major.minor version, for example 3.12")
    if split_mb is not None and split_mb <= 0:
        raise WheelhouseError(f"--split-mb {split_mb:g}: give a size in MB above 0, for example 60")
    for folder in find_links:
        if not Path(folder).is_dir():
            raise WheelhouseError(f"--find-links {folder}: not a folder; give one that holds wheels")
    target = Target(python, expand_platforms(platforms), index_url, [str(Path(f).resolve()) for f in find_links])
    have = read_have(have_file) if have_file else {}

    with tempfile.TemporaryDirectory(prefix="rn50-wheelhouse-") as tmp:
        work = Path(tmp)
        (work / "built").mkdir()
        rn50_wheel = build_rn50_wheel(work / "built", index_url)
        metadata = wheel_metadata(rn50_wheel)
        known = re.findall(r"^Provides-Extra: (\S+)$", metadata, flags=re.M)
        requires = re.search(r"^Requires-Python: (.+)$", metadata, flags=re.M)
        if requires and not python_fits(python, requires.group(1).strip()):
            raise WheelhouseError(f"rn50 needs Python {requires.group(1).strip()}, not --python {python}")
        unknown = [e for e in extras if e not in known]
        if unknown:
            raise WheelhouseError(f"--extras {','.join(unknown)}: rn50 has no such extra; it has: {', '.join(known)}")
        requirement = f"rn50[{','.join(extras)}]" if extras else "rn50"
        wheels = download(target, f"{requirement} @ {rn50_wheel.resolve().as_uri()}", have, work)
        out.mkdir(parents=True, exist_ok=True)
        for wheel in wheels:
            shutil.move(str(wheel), out / wheel.name)
        built_here = sorted(p.name for p in (work / "built").glob("*.whl"))

    files = sorted(out.glob("*.whl"))
    sizes = {f.name: f.stat().st_size for f in files}
    (out / "SHA256SUMS").write_text("".join(f"{sha256_file(f)}  {f.name}\n" for f in files))
    split: Dict[str, List[str]] = {}
    if split_mb is not None:
        for f in files:
            if sizes[f.name] > split_mb * MB:
                split[f.name] = [p.name for p in split_file(f, int(split_mb * MB))]
    total = sum(sizes.values())
    summary = (f"rn50 wheelhouse for {target.describe()}, `pip install {requirement}`: {len(files)} wheels, "
               f"{total / MB:.1f} MB; {len(have)} packages the target has (--have) left out")
    (out / "INSTALL.txt").write_text(install_text(requirement, split, summary, command))
    _print_summary(out, summary, sizes, split, built_here, split_mb)


def _print_summary(out: Path, summary: str, sizes: Dict[str, int], split: Dict[str, List[str]],
                   built_here: List[str], split_mb: Optional[float]) -> None:
    print(f"{PROG}: {summary} (MB = 10^6 bytes)")
    print("largest wheels:")
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[:8]:
        parts = f"  (in {len(split[name])} parts of <= {split_mb:g} MB)" if name in split else ""
        print(f"  {size / MB:9.1f} MB  {name}{parts}")
    if built_here:
        print(f"built here: {', '.join(built_here)}")
    print(f"next: copy {out} to the target and follow {out / 'INSTALL.txt'}")


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"python -m {PROG}",
        description="Write every wheel that `pip install --no-index` needs to install rn50 on a machine "
                    "without internet, for its Python and platform.")
    parser.add_argument("out", help="folder to write (new or empty)")
    parser.add_argument("--python", default=f"{sys.version_info[0]}.{sys.version_info[1]}",
                        help="the target's Python major.minor (default: this one's)")
    parser.add_argument("--platform", action="append", dest="platforms", metavar="TAG",
                        help="the target's platform tag, e.g. manylinux_2_28_x86_64 (takes older manylinux "
                             "wheels too); repeat for more (default: this machine's)")
    parser.add_argument("--extras", action="append", default=[], metavar="E[,E]",
                        help="rn50 extras, e.g. dali-cuda130")
    parser.add_argument("--have", metavar="FILE",
                        help="`pip list --format=freeze` of the target: those packages are left out")
    parser.add_argument("--split-mb", type=float, metavar="N",
                        help="cut files over N MB (10^6 bytes) into FILE.part-aa, -ab, ...")
    parser.add_argument("--index-url", default=DEFAULT_INDEX, help=f"package index (default {DEFAULT_INDEX})")
    parser.add_argument("--find-links", action="append", default=[], metavar="DIR",
                        help="a folder of extra wheels to use, e.g. ones built on the target")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    extras = [e.strip() for group in args.extras for e in group.split(",") if e.strip()]
    command = "python -m rn50.wheelhouse " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    try:
        platforms = args.platforms or [host_platform()]
        build(Path(args.out), args.python, platforms, extras, args.have, args.split_mb,
              args.index_url, args.find_links, command)
    except WheelhouseError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
