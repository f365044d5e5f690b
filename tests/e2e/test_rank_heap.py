"""A rank process loads torch and Lightning with the garbage collector held off, then freezes what they
made (rn50/measure/settings.py), so that no later collection walks those objects again."""

import os
import subprocess
import sys

from helpers import ROOT

# `python -m rn50.rank --help` in a fresh process that reports, as it exits, what the collector holds.
RANK_HELP = ("import atexit, gc, runpy, sys; "
             "atexit.register(lambda: print('collector', gc.get_freeze_count(), gc.isenabled())); "
             "sys.argv = ['rn50.rank', '--help']; runpy.run_module('rn50.rank', run_name='__main__', alter_sys=True)")


def test_a_rank_process_freezes_what_its_imports_made():
    done = subprocess.run([sys.executable, "-c", RANK_HELP], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True)
    assert done.returncode == 0 and "usage: python -m rn50.rank" in done.stdout, done.stderr[-2000:]
    (report,) = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("collector ")]
    frozen, enabled = int(report[0]), report[1]
    assert frozen > 100_000, report  # torch and Lightning make hundreds of thousands
    assert enabled == "True"
