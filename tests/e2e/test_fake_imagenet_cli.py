"""python -m rn50.fake_imagenet as a user runs it: the tree and its summary, and bad input in one line."""

import subprocess
import sys

import pytest

from helpers import ROOT


def cli(*args):
    return subprocess.run([sys.executable, "-m", "rn50.fake_imagenet", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True)


def test_cli_writes_tree_and_summary(tmp_path):
    proc = cli(tmp_path / "out", "--classes", 2, "--train-per-class", 3, "--val-per-class", 1, "--workers", 2)
    assert proc.returncode == 0, proc.stderr
    assert len(list((tmp_path / "out").rglob("*.JPEG"))) == 8
    assert proc.stdout.count("\n") == 1
    assert "wrote 8 images (6 train, 2 val)" in proc.stdout and "KB" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize("case", ["not_empty", "classes_0", "train_0"])
def test_cli_errors_are_one_line(tmp_path, case):
    out = tmp_path / "out"
    counts = {"--classes": 2, "--train-per-class": 1, "--val-per-class": 0}
    if case == "not_empty":
        out.mkdir()
        (out / "keep.txt").write_text("mine")
    else:
        counts["--classes" if case == "classes_0" else "--train-per-class"] = 0
    proc = cli(out, *[str(x) for kv in counts.items() for x in kv])
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rn50.fake_imagenet: error:"), proc.stderr
    if case == "not_empty":
        assert "choose a new directory or remove it" in lines[0]
        assert [p.name for p in out.iterdir()] == ["keep.txt"]
    else:
        assert not out.exists()
