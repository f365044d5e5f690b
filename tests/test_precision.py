"""A precision is one YAML file and one class, typed by its own schema where it has keys of its
own (amp_static's loss_scale); this test also adds one that rn50 has never seen and runs it."""

import textwrap

import pytest
from hydra.errors import ConfigCompositionException

from conftest import TINY, rn50, runs_in
from rn50.options import precision
from rn50.errors import ConfigError
from rn50.point.validate import validate

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
    from rn50.config.typed import typed

    mine = typed({"precision": {"_target_": "my.Amp512", "name": "amp512", "loss_scale": 512}})
    assert OmegaConf.get_type(mine.precision) is AmpStaticConfig and mine.precision.loss_scale == 512.0
    assert OmegaConf.get_type(typed({"precision": {"_target_": "my.P", "name": "p"}}).precision) is PrecisionConfig


def test_a_precision_name_alone_cannot_switch_the_class(compose_cfg):
    with pytest.raises(ConfigError, match=r"^precision\.name=bf16 does not match precision\._target_="
                                          r"rn50\.options\.precision\.Amp, which is precision=amp; choose the precision "
                                          r"with precision=bf16$"):
        precision.of(compose_cfg(["precision.name=bf16"]))


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
