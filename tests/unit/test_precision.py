"""A precision is one YAML file and one class, typed by its own schema where it has keys of its
own (amp_static's loss_scale). One that rn50 has never seen runs in tests/e2e/test_precision_option.py."""

import pytest
from hydra.errors import ConfigCompositionException

from rn50.options import precision
from rn50.errors import ConfigError
from rn50.point.validate import validate


@pytest.mark.parametrize("option,cls,autocast,tf32,peak", [
    ("fp32", precision.Fp32, None, False, "fp32"), ("tf32", precision.Tf32, None, True, "tf32"),
    ("amp", precision.Amp, "float16", True, "fp16"), ("amp_static", precision.AmpStatic, "float16", True, "fp16"),
    ("bf16", precision.Bf16, "bfloat16", True, "bf16"),
])
def test_rn50s_precisions_are_built_from_their_option(compose_cfg, option, cls, autocast, tf32, peak):
    p = precision.of(compose_cfg([f"precision={option}"]))
    assert type(p) is cls and (p.autocast, p.tf32, p.peak) == (autocast, tf32, peak)
    assert (p.scaler("cpu") is not None) == (autocast == "float16")


def test_loss_scale_is_amp_statics_own_typed_key(compose_cfg):
    assert precision.of(compose_cfg(["precision=amp_static", "precision.loss_scale=8"])).loss_scale == 8.0
    assert precision.of(compose_cfg(["precision=amp_static"])).scaler("cpu").get_scale() == 1024.0
    for bad in (["precision=amp", "precision.loss_scale=8"], ["precision=amp_static", "precision.loss_scale=big"]):
        with pytest.raises(ConfigCompositionException, match=r"precision\.loss_scale"):
            compose_cfg(bad)
    with pytest.raises(ConfigError, match=r"^precision\.loss_scale=-1\.0 is out of range: amp_static needs a fixed loss scale, e\.g\. 1024$"):
        validate(compose_cfg(["precision=amp_static", "precision.loss_scale=-1"]))


def test_a_rank_types_an_option_by_its_keys_whatever_its_name():
    """An option of the user's may name a built-in one's schema (amp_static's, with its loss_scale)."""
    from omegaconf import OmegaConf

    from rn50.config.schema import AmpStaticConfig, PrecisionConfig
    from rn50.config.reads import typed

    mine = typed({"precision": {"_target_": "my.Amp512", "name": "amp512", "loss_scale": 512}})
    assert OmegaConf.get_type(mine.precision) is AmpStaticConfig and mine.precision.loss_scale == 512.0
    assert OmegaConf.get_type(typed({"precision": {"_target_": "my.P", "name": "p"}}).precision) is PrecisionConfig


def test_a_precision_name_alone_cannot_switch_the_class(compose_cfg):
    with pytest.raises(ConfigError, match=r"^precision\.name=bf16 does not match precision\._target_="
                                          r"rn50\.options\.precision\.Amp, which is precision=amp; choose the precision "
                                          r"with precision=bf16$"):
        precision.of(compose_cfg(["precision.name=bf16"]))
