"""A data pipeline that rn50 has never seen, one YAML file and one class, runs through python -m rn50,
is recorded, and refuses a batch it cannot take before any rank starts."""

import textwrap

import pytest

from helpers import TINY
from helpers.cli import rn50
from helpers.store import runs_in


# A pipeline of constant images: torch is imported in build(), which only the ranks call.
MODULE = '''
import itertools

from rn50.errors import ConfigError
from rn50.options.pipelines import Pipeline


class Constant(Pipeline):
    """Every image the same grey; label 0."""

    def check(self, cfg):
        if cfg.data.batch_size % 2:
            raise ConfigError(f"data.batch_size={cfg.data.batch_size}: data=constant needs an even batch")

    def build(self, cfg, endless):
        import pytorch_lightning as pl
        import torch

        shape = (cfg.data.batch_size, 3, cfg.data.image_size, cfg.data.image_size)

        class Batches(pl.LightningDataModule):
            def train_dataloader(self):
                device = self.trainer.strategy.root_device
                batch = torch.full(shape, 0.5, device=device), torch.zeros(shape[0], dtype=torch.long, device=device)
                return itertools.repeat(batch)

        return Batches()
'''


YAML = """\
# data=constant: a pipeline that lives outside rn50
_target_: constant_pipeline.Constant
name: constant
"""


def add_option(root):
    (root / "constant_pipeline.py").write_text(textwrap.dedent(MODULE))
    (root / "conf" / "data").mkdir(parents=True)
    (root / "conf" / "data" / "constant.yaml").write_text(YAML)
    return [f"hydra.searchpath=[file://{root / 'conf'}]", "data=constant"], {"PYTHONPATH": str(root)}


@pytest.mark.slow
def test_a_pipeline_from_a_yaml_file_and_a_class_runs_and_is_recorded(tmp_path):
    overrides, env = add_option(tmp_path)
    proc = rn50(tmp_path, *TINY, *overrides, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FINISHED"
    assert run.data.params["data.name"] == "constant"
    assert run.data.params["data._target_"] == "constant_pipeline.Constant"
    m = run.data.metrics  # TINY: batch 4, 2 measured steps
    assert m["throughput/images_per_sec"] == pytest.approx(4 * 2 / m["window/seconds_total"], rel=1e-5)

    bad = rn50(tmp_path, *TINY, *overrides, "data.batch_size=5", env=env)  # its own check, before any rank
    assert bad.returncode == 2
    assert [line for line in bad.stderr.splitlines() if "error" in line] == [
        "rn50: error: data.batch_size=5: data=constant needs an even batch"]
    assert len(runs_in(tmp_path)) == 1
