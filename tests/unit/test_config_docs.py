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
    """docs/architecture.md walks a run through the code: a moved or renamed file must move the page too."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    paths = set(re.findall(r"(?<![\w/])((?:rn50|conf|tests|benchmarks|hydra_plugins)/[\w./-]*\w)", page))
    assert len(paths) > 20 and not [p for p in sorted(paths) if not (ROOT / p).exists()]
    for dotted in set(re.findall(r"\brn50(?:\.\w+)+", page)):  # a module, or a name in one
        parts = dotted.split(".")
        assert any((ROOT.joinpath(*parts[:n]).with_suffix(".py")).is_file() or
                   (ROOT.joinpath(*parts[:n]) / "__init__.py").is_file() for n in (len(parts), len(parts) - 1)), dotted
