"""Loaded by every Python process that modules_on_a_run.sh starts (through PYTHONPATH): records the files of the
functions called under RN50_TRACE_ROOT (module bodies left out: importing is not running) and writes them at
exit to RN50_TRACE_OUT/PID.txt, one per process: the launcher and each rank."""

import atexit
import os
import sys
import threading

_root = os.environ["RN50_TRACE_ROOT"]
_seen = set()


def _called(frame, event, arg):
    if event == "call" and frame.f_code.co_name != "<module>" and frame.f_code.co_filename.startswith(_root):
        _seen.add(frame.f_code.co_filename)


sys.setprofile(_called)
threading.setprofile(_called)


@atexit.register
def _write() -> None:
    with open(os.path.join(os.environ["RN50_TRACE_OUT"], f"{os.getpid()}.txt"), "w") as f:
        f.write("".join(f"{path}\n" for path in sorted(_seen)))
