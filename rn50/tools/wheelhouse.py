"""python -m rn50.wheelhouse OUT: every wheel that installing rn50 offline needs, for another machine.

Run it where the package index is reachable; copy OUT to a node without internet and follow
OUT/INSTALL.txt there (`pip install --no-index --find-links . 'rn50[EXTRAS]'`). The target is given
as a Python version and platform tag, so the wheels may be for another Python than this one.

    python -m rn50.wheelhouse OUT --python 3.12 --platform manylinux_2_28_x86_64 \\
        --extras dali-cuda130 [--have have.txt] [--split-mb N]

--have takes `pip freeze` (or `pip list --format=freeze`) of the target: those packages, such as
a site's torch, are left out and never downloaded. pip does the resolving (wheel_resolve.py); it is
handed a tiny placeholder wheel `NAME-VERSION+rn50have-py3-none-any.whl` without dependencies for
each package the target has, pinned by a constraints file (wheel_target.py), and the placeholders are
dropped afterwards. pip runs with no config files (PIP_CONFIG_FILE=/dev/null) and without the PIP_*
variables that change what it resolves, so a local find-links folder or constraints file of this
machine cannot leak into the wheelhouse; it asks --index-url (PyPI by default) and nothing else.

Here: the build and the command line. The target's tags, markers and --have are in wheel_target.py,
pip and the resolving in wheel_resolve.py, the sums, parts and INSTALL.txt's text in wheel_files.py.
These four import only the standard library and each other (and rn50/__init__.py only `time`): this
runs on machines without rn50's dependencies.
"""

import argparse
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from rn50.tools.wheel_files import install_text, sha256_file, split_file
from rn50.tools.wheel_resolve import Target, build_rn50_wheel, download, python_fits, wheel_metadata
from rn50.tools.wheel_target import (PROG, WheelhouseError, expand_platforms, host_platform,
                                     read_have)

DEFAULT_INDEX = "https://pypi.org/simple"
MB = 1_000_000


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
