"""Loaded by every Python process that modules_on_a_run.sh starts (through PYTHONPATH): records the files of the
functions called under RN50_TRACE_ROOT and writes them at exit to RN50_TRACE_OUT/PID.txt, one per process: the
launcher and each rank. Module and class bodies are left out (their code objects are not CO_OPTIMIZED): they run
when a module is imported, which is not the module's code running."""

import atexit
import inspect
import os
import sys
import threading

_root = os.environ["RN50_TRACE_ROOT"]
_seen = set()


def _called(frame, event, arg):
    code = frame.f_code
    if event == "call" and code.co_flags & inspect.CO_OPTIMIZED and code.co_filename.startswith(_root):
        _seen.add(code.co_filename)


sys.setprofile(_called)
threading.setprofile(_called)


@atexit.register
def _write() -> None:
    with open(os.path.join(os.environ["RN50_TRACE_OUT"], f"{os.getpid()}.txt"), "w") as f:
        f.write("".join(f"{path}\n" for path in sorted(_seen)))
