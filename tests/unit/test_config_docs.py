"""docs/configuration.md and `python -m rn50 --help` are generated from conf/ and rn50/config/schema.py
(rn50/config/docs.py); the README's links and test command stay true, and docs/architecture.md names
files that exist. The --help a user sees: tests/e2e/test_help.py."""

import re

from helpers import CONF, ROOT
from rn50.config import docs as config_docs

PAGE = ROOT / "docs" / "configuration.md"


def test_the_configuration_page_is_the_generators_output():
    assert PAGE.read_text() == config_docs.page(), (
        "docs/configuration.md is stale: run `python -m rn50.config_docs > docs/configuration.md`")


def test_every_option_has_a_line_and_every_key_a_docstring(compose_cfg):
    groups = config_docs.groups(CONF)
    assert "hydra" not in groups and not any(g.startswith("schema") for g in groups)
    assert {o.name for o in groups["precision"]} == {p.stem for p in (CONF / "precision").glob("*.yaml")}
    assert [o.name for o in groups["model"] if o.default] == ["resnet50"]
    sections = config_docs.schema_keys(config_docs.OmegaConf.to_container(compose_cfg()))
    undocumented = [k.key for keys in sections.values() for k in keys if not k.doc]
    assert not undocumented, f"fields without a docstring in rn50/config/schema.py: {undocumented}"
    assert "precision.loss_scale" in {k.key for k in sections["precision=amp_static"]}


def test_help_shows_the_defaults_of_the_options_given(compose_cfg):
    text = config_docs.help_text(_root_=compose_cfg(["data=dali"]))
    assert "data.dali.num_threads (int or null; default 6)" in text
    assert "default sqlite:///$${hydra:runtime.cwd}/mlflow.db" in text  # `$` doubled for Hydra's template


def test_the_readme_links_pages_that_exist_and_ci_runs_its_test_command():
    readme = (ROOT / "README.md").read_text()
    for page in re.findall(r"\((docs/[\w./-]+\.md)\)", readme):
        assert (ROOT / page).is_file(), page
    command = 'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && python -m pytest'
    assert f"\n{command}\n" in readme and f"\n{command}\n" in (ROOT / ".ci" / "run").read_text()


def test_every_file_and_module_the_architecture_page_names_exists():
    """docs/architecture.md walks a run through the code: a moved or renamed file, module or name in one
    must move the page too. Paths are its code spans with a slash (from the root, or inside rn50/: the
    walk's helpers), and bare `NAME.py` spans; dotted names are modules, or names their module defines."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    spans = set(re.findall(r"`([^`\s]+)`", page))
    paths = [s for s in spans if "/" in s and not re.search(r"[<>*$]", s)]
    assert len(paths) > 30, paths
    assert not [p for p in paths if not ((ROOT / p).exists() or (ROOT / "rn50" / p).exists())]
    files = [s for s in spans if re.fullmatch(r"\w+\.py", s)]
    assert not [f for f in files if not any((ROOT / "rn50").rglob(f))]
    for dotted in set(re.findall(r"\brn50(?:\.\w+)+", page)):
        *module, name = dotted.split(".")
        if ROOT.joinpath(*module, name).with_suffix(".py").is_file() or (ROOT.joinpath(*module, name) / "__init__.py").is_file():
            continue
        source = ROOT.joinpath(*module).with_suffix(".py")
        assert source.is_file() and re.search(rf"^(def|class) {name}\b|^{name}\s*[:=]", source.read_text(), re.M), dotted
