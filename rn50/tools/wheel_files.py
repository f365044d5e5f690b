"""What a wheelhouse holds beside its wheels, for rn50/tools/wheelhouse.py's build to write: each file's
SHA-256 (SHA256SUMS), the parts of a file cut for size (--split-mb), and INSTALL.txt's text, the
commands to run on the target. Only the standard library is imported."""

import hashlib
import shlex
from pathlib import Path
from typing import Dict, List


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
