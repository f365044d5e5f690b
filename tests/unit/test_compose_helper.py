"""The tests' compose_cfg (tests/helpers/compose.py: compose_as_hydra) gives what Hydra's compose gives, for each
kind of override: the same config, or the same error. It composes each set of group choices once and sets
the other overrides afterwards with Hydra's own function; if Hydra changed that order, these would fail."""

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from helpers.compose import compose_as_hydra, composed_by_hydra

SAME = [
    [],
    ["data.batch_size=1", "optim.lr=0.5", "data.batch_size=2"],  # in order: the last one wins
    ["device=cpu", "data.batch_size=4"],  # a profile sets the key; the command line wins
    ["data.batch_size=4", "device=cpu"],  # in either order
    ["data.root=/a", "data={root: /b}"],  # a dict on a group is a value, set in order: /b
    ["model.arch=resnet18", "model={arch: resnet34}", "model=resnet50"],
    ["hydra.run.dir=elsewhere", "bench.steps=3"],  # Hydra's own keys: composed whole
    ["precision=amp_static", "precision.loss_scale=1024"],  # a key of the option chosen
    ["model=resnet18", "dist=1n4g", "cluster=slurm", "cluster.partition=gpu", "experiment=fastest"],
    ["data=dali", "data.root=/data", "data.dali.device_memory_padding=0"],
    ["+experiment=mlperf"],  # Hydra refuses it (experiment is in the defaults list): so must the helper
    ["~mfu", "++optim.lr=0.2", "++optim.extra=1"],
]


@pytest.mark.parametrize("overrides", SAME, ids=" ".join)
def test_the_same_config_as_hydras_compose(overrides):
    try:
        want = OmegaConf.to_container(composed_by_hydra(tuple(overrides)))
    except ConfigCompositionException as e:  # where Hydra refuses, the helper must refuse the same way
        with pytest.raises(ConfigCompositionException) as got:
            compose_as_hydra(overrides)
        assert str(got.value) == str(e)
        return
    cfg = compose_as_hydra(overrides)
    assert OmegaConf.to_container(cfg) == want
    assert OmegaConf.is_struct(cfg)


@pytest.mark.parametrize("overrides", [
    ["data.batch_sizes=8"],  # no such key
    ["bench.steps=three"],  # the schema's type
    ["+data.batch_size=8"],  # + on a key that is there
    ["model=resnet19"],  # no such option
    ["data.batch_size=1,2"],  # a sweep, outside --multirun
    ["bench.steps=three", "hydra.job.chdri=true"],  # the first of two errors, whichever comes first
    ["data.batch_size@data=8"],  # a package on a key
], ids=" ".join)
def test_the_same_errors_as_hydras_compose(overrides):
    with pytest.raises(Exception) as want:
        composed_by_hydra(tuple(overrides))
    with pytest.raises(type(want.value)) as got:
        compose_as_hydra(overrides)
    assert str(got.value) == str(want.value)
    assert str(got.value.__cause__) == str(want.value.__cause__)


def test_a_group_on_the_command_lines_searchpath_is_a_group(tmp_path):
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "x.yaml").write_text("a: 1\n")
    overrides = [f"hydra.searchpath=[file://{tmp_path}]", "+extra=x"]
    with pytest.raises(ConfigCompositionException) as want:  # the schema has no key `extra`
        composed_by_hydra(tuple(overrides))
    with pytest.raises(ConfigCompositionException) as got:
        compose_as_hydra(overrides)
    assert str(got.value.__cause__) == str(want.value.__cause__)
