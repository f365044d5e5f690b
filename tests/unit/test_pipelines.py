"""A data pipeline is one YAML file and one class, built from its option; what changes a sweep
point's hash. One that rn50 has never seen runs in tests/e2e/test_pipeline_option.py."""

import contextlib

import pytest

from rn50.options import pipelines
from rn50.options.components import Options
from rn50.errors import ConfigError


def test_dali_reads_the_precision_option_built_with_it(compose_cfg):
    """data=dali's float16 output follows the run's precision option (Options.of hands it over), not
    one built again from the config: here the option handed in disagrees with the config."""
    cfg = compose_cfg(["data=dali", "data.root=/data/imagenet", "data.dali.output_dtype=float16", "precision=fp32"])
    with pytest.raises(ConfigError, match="needs an autocast precision"):
        Options.of(cfg).data.check(cfg)
    bf16 = Options.of(compose_cfg(["precision=bf16"])).precision
    options = Options.of(cfg, precision=bf16)
    assert options.data.run is options and bf16.run is options
    options.data.check(cfg)  # bf16 autocasts: accepted


def test_rn50s_pipelines_are_built_from_their_option(compose_cfg):
    for option, cls in [("synthetic", pipelines.Synthetic), ("imagefolder", pipelines.ImageFolder),
                        ("dali", pipelines.Dali)]:
        assert type(pipelines.of(compose_cfg([f"data={option}"]))) is cls


def test_a_target_that_cannot_be_built_is_one_line(compose_cfg):
    cfg = compose_cfg(["data._target_=rn50.options.pipelines.NoSuchPipeline"])
    with pytest.raises(ConfigError, match=r"^data\._target_=rn50\.options\.pipelines\.NoSuchPipeline cannot be built: "):
        pipelines.of(cfg)


def test_data_name_alone_cannot_switch_the_pipeline(compose_cfg):
    """data.name labels the run; a name that is not the class's would record a pipeline that did not run."""
    with pytest.raises(ConfigError, match=r"^data\.name=dali does not match data\._target_=rn50\.options\.pipelines\.Synthetic, "
                                          r"which is data=synthetic; choose the pipeline with data=dali$"):
        pipelines.of(compose_cfg(["data.name=dali"]))


def test_the_hash_of_a_sweep_point_ignores_keys_that_change_nothing(compose_cfg):
    """sweep.resume matches points by hash: data._target_ (data.name stands for it) and keys added
    later, at the value that behaves as before (identity.LATER_KEYS), stay out, so points recorded
    before those keys existed still match. The pinned hashes are those of commit 56dc964."""
    from omegaconf import OmegaConf

    from rn50.point.identity import LATER_KEYS, config_hash

    cfg = compose_cfg(["mlflow.tracking_uri=sqlite:///unused.db"])
    assert config_hash(cfg) == "ceceeae15162444c"
    dali = ["mlflow.tracking_uri=sqlite:///unused.db", "data=dali", "data.root=/x"]
    # data=dali as it was: DALI's own decoder settings, torch's default stream.
    before_dali = [*dali, "data.dali.num_threads=null", "data.dali.hw_decoder_load=0.65", "data.dali.cpu_decode_share=0"]
    assert config_hash(compose_cfg([*before_dali, "data.dali.training_stream=default"])) == "eef8e665719cf54f"
    # Its defaults since then decode and train differently on GPUs: not the same point.
    assert config_hash(compose_cfg([*before_dali])) != "eef8e665719cf54f"
    assert config_hash(compose_cfg(dali)) not in ("eef8e665719cf54f", config_hash(compose_cfg(before_dali)))
    assert config_hash(compose_cfg([*before_dali, "dist.accelerator=cpu"])) == "8ac2e93bf57d92bd"  # as before
    # Pipelines that ignore data.dali keep their points whatever it says (experiment=fastest sets some).
    assert config_hash(compose_cfg(["mlflow.tracking_uri=sqlite:///unused.db", "data.dali.cpu_decode_share=0.5",
                                    "data.dali.num_threads=3"])) == "ceceeae15162444c"
    before = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))  # untyped: keys can go
    del before.data["_target_"]
    for dotted in LATER_KEYS:
        *path, key = dotted.split(".")
        del OmegaConf.select(before, ".".join(path))[key]
    assert config_hash(cfg) == config_hash(before)
    assert config_hash(compose_cfg([*before_dali, "data.dali.cpu_decode_share=0.5"])) != \
        config_hash(compose_cfg(before_dali))
    # One process has no DDP: dist.broadcast_buffers changes nothing there. On 2 GPUs, DDP's buffer broadcast
    # each step (torch's default, what rn50 ran before the key existed) is the point recorded before it.
    two = ["mlflow.tracking_uri=sqlite:///unused.db", "dist=1n2g"]
    assert config_hash(compose_cfg(["mlflow.tracking_uri=sqlite:///unused.db", "dist.broadcast_buffers=true"])) == \
        "ceceeae15162444c"
    assert config_hash(compose_cfg([*two, "dist.broadcast_buffers=true"])) == "61f3579db2de6b48"
    assert config_hash(compose_cfg(two)) != "61f3579db2de6b48"
    tuned = compose_cfg(["mlflow.tracking_uri=sqlite:///unused.db", "model.compile=true", "model.autotune_pointwise=true"])
    assert config_hash(tuned) != config_hash(compose_cfg(["mlflow.tracking_uri=sqlite:///unused.db", "model.compile=true"]))


class FakeStream:
    """torch.cuda.Stream as Dali.training_stream makes one, on a machine without CUDA."""

    def __init__(self, device=None, priority=0):
        self.device, self.priority = device, priority


def test_dali_trains_on_a_stream_of_its_own_on_gpus_only(compose_cfg, monkeypatch):
    import torch

    entered = []
    monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: entered.append(s) or contextlib.nullcontext(s))
    pipelines.dali()._own_stream.cache_clear()

    def stream(*overrides):
        cfg = compose_cfg(["data=dali", "data.root=/data", *overrides])
        with pipelines.of(cfg).training_stream(cfg) as s:
            return s

    try:
        assert stream("dist.accelerator=cpu") is None
        assert stream("dist.accelerator=gpu", "data.dali.training_stream=default") is None
        cfg = compose_cfg(["dist.accelerator=gpu"])
        with pipelines.of(cfg).training_stream(cfg) as s:  # synthetic trains where it always has
            assert s is None
        mine = stream("dist.accelerator=gpu")
        assert mine is entered[-1] and (mine.device, mine.priority) == (1, 0)  # the rank's device
        assert stream("dist.accelerator=gpu") is mine  # a warm rank reuses it run after run
    finally:
        pipelines.dali()._own_stream.cache_clear()
    with pytest.raises(Exception, match="training_stream"):
        compose_cfg(["data.dali.training_stream=high"])


@pytest.mark.gpu
def test_dali_stream_is_not_torchs_default_on_a_real_gpu(compose_cfg):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    cfg = compose_cfg(["data=dali", "data.root=/data", "dist.accelerator=gpu"])
    with pipelines.of(cfg).training_stream(cfg):
        assert torch.cuda.current_stream() != torch.cuda.default_stream()
        assert torch.cuda.current_stream().device == torch.device("cuda", torch.cuda.current_device())
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
