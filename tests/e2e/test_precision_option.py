"""A precision that rn50 has never seen, one YAML file and one class, runs through python -m rn50 and is recorded."""

import textwrap

import pytest

from helpers import TINY
from helpers.cli import rn50
from helpers.store import runs_in


# bf16 autocast with TF32 off: what bf16 would be without TF32 for the layers autocast keeps in fp32.
MODULE = '''
from rn50.options.precision import Bf16


class Bf16NoTf32(Bf16):
    name, tf32 = "bf16_no_tf32", False
'''


YAML = """\
_target_: my_precision.Bf16NoTf32
name: bf16_no_tf32
"""


@pytest.mark.slow
def test_a_precision_from_a_yaml_file_and_a_class_runs_and_is_recorded(tmp_path):
    (tmp_path / "my_precision.py").write_text(textwrap.dedent(MODULE))
    (tmp_path / "conf" / "precision").mkdir(parents=True)
    (tmp_path / "conf" / "precision" / "bf16_no_tf32.yaml").write_text(YAML)
    overrides = [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "precision=bf16_no_tf32"]
    proc = rn50(tmp_path, *TINY, *overrides, env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FINISHED"
    assert run.data.params["precision.name"] == "bf16_no_tf32"
    assert run.data.params["precision._target_"] == "my_precision.Bf16NoTf32"
    assert run.data.metrics["throughput/images_per_sec"] > 0
