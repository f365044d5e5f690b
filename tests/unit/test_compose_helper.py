"""The tests' compose_cfg (tests/conftest.py: compose_as_hydra) gives what Hydra's compose gives: the
same config and the same errors. It composes each set of group choices once and sets the other
overrides afterwards with Hydra's own function; if Hydra changed that order, these would fail."""

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from conftest import _composed, compose_as_hydra

SAME = [
    [],
    ["data.batch_size=1", "optim.lr=0.5", "data.batch_size=2"],  # in order: the last one wins
    ["device=cpu", "data.batch_size=4"],  # a profile sets the key; the command line wins
    ["data.batch_size=4", "hydra.run.dir=elsewhere", "device=cpu"],  # in either order, beside Hydra's own
    ["precision=amp_static", "precision.loss_scale=1024"],  # a key of the option chosen
    ["model=resnet18", "dist=1n4g", "cluster=slurm", "cluster.partition=gpu", "experiment=fastest"],
    ["data=dali", "data.root=/data", "data.dali.device_memory_padding=0"],
    ["+experiment=mlperf"],  # Hydra refuses it (experiment is in the defaults list): so must the helper
    ["~mfu", "++optim.lr=0.2", "++optim.extra=1"],
]


@pytest.mark.parametrize("overrides", SAME, ids=" ".join)
def test_the_same_config_as_hydras_compose(overrides):
    try:
        want = OmegaConf.to_container(_composed(tuple(overrides)))
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
], ids=" ".join)
def test_the_same_errors_as_hydras_compose(overrides):
    with pytest.raises(Exception) as want:
        _composed(tuple(overrides))
    with pytest.raises(type(want.value)) as got:
        compose_as_hydra(overrides)
    assert str(got.value) == str(want.value)
    assert str(got.value.__cause__) == str(want.value.__cause__)
