"""Presets (conf/experiment/), compile modes and CUDA graphs as config, and data.batch_size=auto."""

import pytest

from rn50.config.compilation import check_cuda_graphs, compile_mode, cuda_graph_keys
from rn50.config.reads import decided
from rn50.launcher.launch import preflight
from rn50.errors import ConfigError
from rn50.config.schema import Accelerator, CompileMode, OptimName
from rn50.point.validate import validate
from rn50.recipe.optimizers import fused_default


def on_gpu(cfg):
    cfg.dist.accelerator = Accelerator.gpu  # as launch.preflight resolves it on a GPU host
    return cfg


def test_fastest_is_the_best_measured_setting(compose_cfg):
    cfg = on_gpu(compose_cfg(["experiment=fastest"]))
    assert cfg.precision.name == "amp" and cfg.data.batch_size == 512
    assert cfg.model.compile and cfg.model.cuda_graphs and cfg.model.channels_last
    assert cfg.model.autotune_pointwise and cfg.model.autotune_coordinate_descent
    validate(cfg)
    assert compile_mode(cfg.model) == "reduce-overhead" and cfg.model.compile_mode.value == "default"
    # What the run records: preflight decides the mode that captures (here=False: the GPUs are elsewhere)
    run = preflight(cfg, here=False).cfg
    assert run.model.compile_mode.value == "reduce-overhead" and cfg.model.compile_mode.value == "default"


def test_each_step_gets_the_jpeg_decoding_measured_best_for_it(compose_cfg):
    # data=dali's defaults come from 4 GPUs of one host, where the CPU decides (issue 44); the compiled
    # fastest step's from one GPU (benchmarks/notes/2026-11-24-dali-levers.md, issue 14).
    def decoding(overrides):
        d = validate(on_gpu(compose_cfg([*overrides, "data.root=/x"]))).data
        return d.dali.hw_decoder_load, d.dali.cpu_decode_share, d.dali.num_threads or d.num_workers

    assert decoding(["data=dali"]) == (0.99, 0.0, 6)
    for preset in ("fastest", "mlperf"):  # either order on the command line
        assert decoding([f"experiment={preset}", "data=dali"]) == decoding(["data=dali", f"experiment={preset}"]) \
            == (0.65, 0.5, 8)
    assert decoding(["data=dali", "data.dali.hw_decoder_load=0.5"])[0] == 0.5  # the command line still wins


def test_mlperf_is_mlperfs_setting_where_pytorch_has_it(compose_cfg):
    cfg = validate(on_gpu(compose_cfg(["experiment=mlperf"])))
    assert (cfg.data.batch_size, cfg.data.image_size, cfg.precision.name) == (400, 224, "amp")
    assert cfg.model.arch.value == "resnet50" and cfg.model.channels_last
    assert cfg.model.compile and cfg.model.cuda_graphs
    # LARS at its trust coefficient, momentum 0.9, weight decay 5e-5; label smoothing 0.1 for train=accuracy.
    assert (cfg.optim.name, cfg.optim.lars_trust, cfg.optim.momentum, cfg.optim.weight_decay) == \
        (OptimName.lars, 0.001, 0.9, 5e-05)
    assert cfg.optim.lr == 1.0 and not fused_default(cfg.optim, "cuda")  # 1.0 learns the synthetic batch
    assert cfg.train.label_smoothing == 0.1


@pytest.mark.parametrize("before", [True, False])
def test_the_command_line_wins_over_a_preset(compose_cfg, before):
    mine = ["data.batch_size=256", "precision=bf16", "model.cuda_graphs=false"]
    cfg = compose_cfg(mine + ["experiment=fastest"] if before else ["experiment=fastest"] + mine)
    assert cfg.data.batch_size == 256 and cfg.precision.name == "bf16"
    validate(on_gpu(cfg))
    assert compile_mode(cfg.model) == "default"  # no graphs: the preset's compile, default mode


@pytest.mark.parametrize("overrides,message", [
    (["model.cuda_graphs=true"], "model.cuda_graphs=true needs model.compile=true"),
    (["model.compile=true", "model.cuda_graphs=true", "model.compile_mode=max-autotune-no-cudagraphs"],
     "conflicts with model.compile_mode=max-autotune-no-cudagraphs"),
    (["model.compile=true", "model.cuda_graphs=true", "bench.warmup_steps=2"], r"bench\.warmup_steps=2 is too few"),
    (["model.autotune_pointwise=true"], "model.autotune_pointwise=true tunes torch.compile's kernels, so it needs "
                                        "model.compile=true"),
    (["model.autotune_coordinate_descent=true"], "model.autotune_coordinate_descent=true tunes torch.compile's "
                                                 "kernels, so it needs model.compile=true"),
    (["model.compile_ddp=no_optimization"], "model.compile_ddp=no_optimization sets how torch.compile splits the "
                                            "graph for DDP, so it needs model.compile=true"),
])
def test_captures_that_cannot_work_name_the_key(compose_cfg, overrides, message):
    with pytest.raises(ConfigError, match=message):
        check_cuda_graphs(on_gpu(compose_cfg(overrides)))


def test_a_capturing_compile_mode_is_recorded_as_cuda_graphs(compose_cfg):
    cfg = on_gpu(compose_cfg(["model.compile=true", "model.compile_mode=max-autotune"]))
    check_cuda_graphs(cfg)
    assert not cfg.model.cuda_graphs  # a check changes nothing; preflight records what it captures
    assert cuda_graph_keys(cfg.model) == {"model.cuda_graphs": True}
    run = decided(cfg, cuda_graph_keys(cfg.model))
    assert run.model.cuda_graphs and compile_mode(run.model) == "max-autotune" and not cfg.model.cuda_graphs
    # model.cuda_graphs=true with the default mode is recorded as the mode that captures
    asked = on_gpu(compose_cfg(["model.compile=true", "model.cuda_graphs=true"]))
    assert cuda_graph_keys(asked.model) == {"model.cuda_graphs": True, "model.compile_mode": CompileMode["reduce-overhead"]}
    with pytest.raises(ConfigError, match="model.compile_mode=reduce-overhead captures CUDA graphs"):
        validate(compose_cfg(["dist.accelerator=cpu", "model.compile=true", "model.compile_mode=reduce-overhead"]))
    plain = validate(compose_cfg(["model.compile_mode=reduce-overhead"]))  # not compiled: no graphs
    assert compile_mode(plain.model) is None and not plain.model.cuda_graphs


def test_an_unknown_compile_mode_lists_the_modes(compose_cfg):
    from hydra.errors import ConfigCompositionException

    from rn50.config.messages import one_line

    with pytest.raises(ConfigCompositionException) as info:
        compose_cfg(["model.compile_mode=fast"])
    assert "model.compile_mode" in one_line(info.value) and "reduce-overhead" in one_line(info.value)


def test_batch_size_auto_composes_and_mixes_with_fixed_sizes(compose_cfg):
    assert validate(compose_cfg(["data.batch_size=auto"])).data.batch_size == "auto"
    assert validate(compose_cfg(["experiment=fastest", "data.batch_size=auto"])).data.batch_size == "auto"
    assert validate(compose_cfg(["data.batch_size=96"])).data.batch_size == 96


@pytest.mark.parametrize("value,message", [
    ("lots", "data.batch_size=lots: use a positive integer or auto"),
    ("Auto", "data.batch_size=Auto: use a positive integer or auto"),
    ("2.5", "data.batch_size=2.5: use a positive integer or auto"),
    ("true", "data.batch_size=True: use a positive integer or auto"),
    ("0", "data.batch_size=0 is out of range: use a batch size of 1 or more per device"),
])
def test_bad_batch_sizes_name_the_key(compose_cfg, value, message):
    with pytest.raises(ConfigError) as info:
        validate(compose_cfg([f"data.batch_size={value}"]))
    assert str(info.value) == message


def test_compile_settings_are_set_for_each_compile_of_a_warm_rank(compose_cfg, monkeypatch):
    """A warm rank compiles the next sweep point in the same process: the settings follow each."""
    import torch._dynamo.config as dynamo
    import torch._inductor.config as inductor

    from rn50.launcher.launch import num_classes
    from rn50.recipe.model import ResNetModule

    # Inductor's settings are the process's: whatever the points set, the test puts them back.
    monkeypatch.setattr(inductor, "max_autotune_pointwise", inductor.max_autotune_pointwise)
    monkeypatch.setattr(inductor, "coordinate_descent_tuning", inductor.coordinate_descent_tuning)
    monkeypatch.setattr(dynamo, "optimize_ddp", dynamo.optimize_ddp)

    def compile_point(overrides):
        """Inductor's settings once a rank has built the point's model as a run builds it
        (rn50/rank/run.py), from the config as the launcher hands it on (composed, validated, its
        classes set); torch.compile compiles later, with those settings."""
        cfg = validate(on_gpu(compose_cfg(["model=resnet18", *overrides])))
        cfg = decided(cfg, {"model.num_classes": num_classes(cfg)})  # synthetic data: ImageNet's classes
        ResNetModule(cfg.model, cfg.optim, fused_default(cfg.optim, "cuda"))
        return inductor.max_autotune_pointwise, inductor.coordinate_descent_tuning, dynamo.optimize_ddp

    # One rank, four points in turn: each compile takes its own point's settings, not the last point's.
    assert compile_point(["experiment=fastest"]) == (True, True, "ddp_optimizer")
    assert compile_point(["model.compile=true", "model.compile_ddp=no_optimization"]) == (False, False,
                                                                                          "no_optimization")
    assert compile_point(["model.compile=true"]) == (False, False, "ddp_optimizer")
    assert compile_point(["experiment=fastest", "model.autotune_coordinate_descent=false"]) == (True, False,
                                                                                               "ddp_optimizer")
