"""ruff and import-linter, as configured in pyproject.toml, find nothing, and rn50's imports sit at
the top of their modules: CI runs these checks through this file."""

import ast
import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT

# Imports inside functions hide the layering (docs/architecture.md); the few that remain say why.
MAX_FUNCTION_IMPORTS = 9


def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "rn50", "hydra_plugins", "tests", "benchmarks"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]


def test_import_contracts_are_kept():
    """The layers, the launcher without torch, mlflow in rn50.tracking only, the tools off the
    run's path: pyproject.toml's [tool.importlinter] contracts."""
    lint = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True))")
    done = subprocess.run([sys.executable, "-c", lint], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-1000:]
    assert "0 broken" in done.stdout, done.stdout[-4000:]


def function_imports(path):
    """(line, has a comment) of each import statement inside a function of one module."""
    source = path.read_text()
    lines = source.splitlines()
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                found.append((child.lineno, "#" in lines[child.lineno - 1]))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(ast.parse(source), False)
    return found


def test_few_imports_inside_functions_each_saying_why():
    found = {f"{path.relative_to(ROOT)}:{line}": commented
             for path in sorted((ROOT / "rn50").rglob("*.py")) for line, commented in function_imports(path)}
    assert len(found) <= MAX_FUNCTION_IMPORTS, f"{len(found)} imports inside functions: {sorted(found)}"
    assert all(found.values()), f"no comment says why: {sorted(k for k, v in found.items() if not v)}"


def test_the_count_sees_an_import_inside_a_function(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import os\n\n\ndef f():\n    import sys  # why\n    from os import path\n    return sys, path\n")
    assert function_imports(module) == [(5, True), (6, False)]


def test_the_architecture_page_draws_the_layers_of_the_contract():
    """docs/architecture.md's diagram: one line per layer, top first, as pyproject.toml lists them."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11's; 3.10 leaves this check to CI's newer Python
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c["layers"] for c in config["contracts"] if c["type"] == "layers")
    contract = [sorted(name.strip() for name in layer.split("|")) for layer in layers]
    page = (ROOT / "docs" / "architecture.md").read_text()
    diagram = page.split("## Layers", 1)[1].split("```")[1]
    drawn = [sorted(re.findall(r"rn50\.[\w.]+", line)) for line in diagram.splitlines() if line.startswith(" rn50.")]
    assert drawn == contract
