"""What rn50.wheelhouse (rn50/tools/wheelhouse.py) builds for: the target machine's platform tags and
environment markers, and the packages it has already (--have), which pip is handed as placeholder
wheels so that it never downloads them. Also what the wheelhouse's modules share: its name (PROG), its
error (WheelhouseError) and PEP 503's form of a project name. Only the standard library is imported."""

import base64
import hashlib
import platform
import re
import sys
import urllib.parse
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

PROG = "rn50.wheelhouse"
PLACEHOLDER = "rn50have"
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
