"""The scripts of benchmarks/ as modules, for tests of what they compute."""
import importlib
import os
import sys

from helpers import ROOT


def benchmark_scripts(*names):
    """benchmarks/NAME.py for each name, as modules: loaded together the way `python benchmarks/NAME.py`
    finds its siblings (`from fusion_probe import ...`), then taken out of sys.modules again, so that no
    other test finds a module of those names."""
    folder = str(ROOT / "benchmarks")
    sys.path.insert(0, folder)
    try:
        return tuple(importlib.import_module(name) for name in names)
    finally:
        sys.path.remove(folder)
        for name, module in list(sys.modules.items()):
            if os.path.dirname(getattr(module, "__file__", None) or "") == folder:
                del sys.modules[name]
