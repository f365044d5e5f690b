"""python -m rn50 --help explains rn50 with the generated groups and keys, as docs/configuration.md does."""

import re
import subprocess
import sys

from helpers import ROOT
from rn50.config import docs as config_docs


def test_help_explains_rn50_with_the_generated_groups_and_keys(compose_cfg):
    done = subprocess.run([sys.executable, "-m", "rn50", "--help"], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert out.startswith("python -m rn50 ") and "Declarative ResNet-50 training benchmarks" in out
    assert config_docs.text(compose_cfg(), markdown=False).rstrip() in out  # the same text as the page's
    # Hydra's generic page is gone: its banner, the internal schema/* groups, the MFU peaks table.
    assert "powered by Hydra" not in out and "schema/" not in out and "NVIDIA H100" not in out
    examples = re.findall(r"^  python -m rn50(.*?)(?:#|$)", out.split("EXAMPLES", 1)[1], re.M)
    assert len(examples) == 3, examples
    for example in examples:  # each composes
        compose_cfg([a for a in example.split() if a != "--multirun" and "," not in a])


def test_every_way_to_ask_for_help_gets_the_groups_and_keys(compose_cfg):
    # The text is made only when help is asked for (Hydra resolves the template on every run):
    # -h, and --help shortened as argparse allows, ask too.
    groups = config_docs.text(compose_cfg(), markdown=False).rstrip()
    for asked in (["-h"], ["--hel"], ["-mh"]):
        done = subprocess.run([sys.executable, "-m", "rn50", *asked], capture_output=True, text=True,
                              cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
        assert done.returncode == 0 and groups in done.stdout, (asked, done.stderr[-2000:])
