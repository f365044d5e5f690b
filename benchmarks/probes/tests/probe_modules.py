"""The probes' tests load the probes with this: pytest puts this folder on sys.path for the test files here,
as it puts tests/ for the suite's (a conftest.py here would take the module name `conftest` from
tests/conftest.py, which the suite's files import)."""
import importlib
import os
import sys
from pathlib import Path

PROBES = Path(__file__).resolve().parent.parent


def load_probes(*names):
    """benchmarks/probes/NAME.py for each name, as modules: loaded together the way
    `python benchmarks/probes/NAME.py` finds its siblings (`from fusion_probe import ...`), then taken out of
    sys.modules again, so that no other test finds a module of those names."""
    folder = str(PROBES)
    sys.path.insert(0, folder)
    try:
        return tuple(importlib.import_module(name) for name in names)
    finally:
        sys.path.remove(folder)
        for name, module in list(sys.modules.items()):
            if os.path.dirname(getattr(module, "__file__", None) or "") == folder:
                del sys.modules[name]
