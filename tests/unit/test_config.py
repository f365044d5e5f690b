"""Every option composes into the typed schema; bad values fail naming the key."""

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf.errors import ValidationError

from helpers import CONF
from rn50.errors import ConfigError
from rn50.config.messages import one_line
from rn50.config.schema import Accelerator, Arch, Device
from rn50.config.reads import dist_name
from rn50.options.profilers import profiled_steps
from rn50.point.identity import config_hash
from rn50.point.validate import validate

GROUPS = ["model", "precision", "data", "dist", "profiler", "cluster", "mfu", "experiment", "device"]
OPTIONS = [(g, p.stem) for g in GROUPS for p in sorted((CONF / g).glob("*.yaml"))]


def test_defaults_match_the_card(compose_cfg):
    cfg = validate(compose_cfg())
    assert cfg.model.arch == Arch.resnet50 and cfg.model.channels_last and not cfg.model.compile
    assert cfg.precision.name == "amp"
    assert (cfg.data.name, cfg.data.batch_size, cfg.data.image_size) == ("synthetic", 256, 224)
    assert dist_name(cfg) == "1n1g" and cfg.dist.accelerator == Accelerator.auto
    assert (cfg.bench.warmup_steps, cfg.bench.steps) == (20, 100)
    assert cfg.mlflow.experiment_name == "rn50"


@pytest.mark.parametrize("group,option", OPTIONS)
def test_every_option_composes(compose_cfg, group, option):
    extra = ["data.root=/data/imagenet"] if (group, option) in {("data", "imagefolder"), ("data", "dali")} else []
    validate(compose_cfg([f"{group}={option}", *extra]))


@pytest.mark.parametrize("option", ["imagefolder", "dali"])
def test_real_data_needs_a_root(compose_cfg, option):
    with pytest.raises(ConfigError, match=r"data\.root is not set"):
        validate(compose_cfg([f"data={option}"]))


def test_group_lists_are_complete():
    names = {g: {o for gg, o in OPTIONS if gg == g} for g in GROUPS}
    assert names["model"] == {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"}
    assert names["precision"] == {"fp32", "tf32", "amp", "amp_static", "bf16"}
    assert names["dist"] == {"1n1g", "1n2g", "1n4g", "1n8g", "2n8g", "4n8g"}
    assert names["profiler"] == {"none", "simple", "pytorch", "ncu"}
    assert names["data"] == {"synthetic", "imagefolder", "dali"}
    assert names["device"] == {"auto", "gpu", "cpu"}


def test_device_profiles_set_keys_that_the_command_line_still_wins_over(compose_cfg):
    """device=cpu is the CPU profile that device=auto takes on a host without a GPU; device=gpu is
    the full default on any host. Neither changes the hash of a run with the same keys."""
    default, gpu, cpu = compose_cfg(), compose_cfg(["device=gpu"]), compose_cfg(["device=cpu"])
    assert (default.device, gpu.device, cpu.device) == (Device.auto, Device.gpu, Device.cpu)
    assert config_hash(gpu) == config_hash(default)  # the same keys: the same point
    assert (cpu.model.arch, cpu.data.image_size, cpu.precision.name) == (Arch.resnet50, 224, "fp32")
    assert cpu.dist.accelerator == Accelerator.cpu
    assert cpu.data.batch_size < default.data.batch_size and cpu.bench.steps < default.bench.steps
    assert config_hash(cpu) != config_hash(default)
    mine = compose_cfg(["device=cpu", "precision=bf16", "data.batch_size=2", "bench.steps=5", "model=resnet18"])
    assert (mine.precision.name, mine.data.batch_size, mine.bench.steps, mine.model.arch) == ("bf16", 2, 5, Arch.resnet18)
    assert mine.bench.warmup_steps == cpu.bench.warmup_steps  # the keys not given stay the profile's


def test_dist_options_name_their_shape(compose_cfg):
    cfg = compose_cfg(["dist=4n8g"])
    assert (cfg.dist.nodes, cfg.dist.gpus_per_node, dist_name(cfg)) == (4, 8, "4n8g")


def test_amp_static_defaults_to_1024(compose_cfg):
    assert compose_cfg(["precision=amp_static"]).precision.loss_scale == 1024


def test_unknown_option_lists_the_choices(compose_cfg):
    with pytest.raises(MissingConfigException) as info:
        compose_cfg(["precision=fp8"])
    line = one_line(info.value)
    assert "precision=fp8" in line and "bf16" in line and "amp_static" in line


def test_wrong_type_names_the_dotted_key(compose_cfg):
    with pytest.raises(ConfigCompositionException) as info:
        compose_cfg(["dist.accelerator=tpu"])
    line = one_line(info.value)
    assert "dist.accelerator" in line and "gpu" in line and "\n" not in line


def test_unknown_key_is_refused(compose_cfg):
    with pytest.raises(ConfigCompositionException):
        compose_cfg(["data.batchsize=3"])


@pytest.mark.parametrize(
    "override,key",
    [
        ("data.batch_size=0", "data.batch_size"),
        ("data.batch_size=-4", "data.batch_size"),
        ("data.image_size=16", "data.image_size"),
        ("bench.steps=0", "bench.steps"),
        ("bench.warmup_steps=0", "bench.warmup_steps"),
        ("bench.repeats=0", "bench.repeats"),
        ("precision.loss_scale=0", "precision.loss_scale"),
        ("profiler.active=0", "profiler.active"),
        ("profiler.wait=-1", "profiler.wait"),
        ("profiler.steps=0", "profiler.steps"),
        ("data.dali.num_threads=0", "data.dali.num_threads"),
        ("data.dali.prefetch_queue_depth=0", "data.dali.prefetch_queue_depth"),
        ("data.dali.hw_decoder_load=1.5", "data.dali.hw_decoder_load"),
        ("data.dali.hw_decoder_load=-0.1", "data.dali.hw_decoder_load"),
        ("data.dali.device_memory_padding=-1", "data.dali.device_memory_padding"),
        ("data.dali.host_memory_padding=-1", "data.dali.host_memory_padding"),
        ("data.dali.preallocate_width_hint=-1", "data.dali.preallocate_width_hint"),
        ("data.dali.preallocate_height_hint=-1", "data.dali.preallocate_height_hint"),
        ("data.dali.cpu_prefetch_queue_depth=0", "data.dali.cpu_prefetch_queue_depth"),
        ("data.dali.cpu_decode_share=1.5", "data.dali.cpu_decode_share"),
        ("data.dali.hybrid_huffman_threshold=-1", "data.dali.hybrid_huffman_threshold"),
        ("data.dali.cache_size_mb=-1", "data.dali.cache_size_mb"),
    ],
)
def test_out_of_range_values_name_the_key(compose_cfg, override, key):
    option = {"precision.loss_scale": "precision=amp_static", "profiler.steps": "profiler=ncu",
              "profiler.wait": "profiler=pytorch", "profiler.active": "profiler=pytorch"}.get(key)
    overrides = ([option] if option else []) + [override]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as info:
        validate(compose_cfg(overrides))
    assert "\n" not in str(info.value)


def test_dali_float16_outputs_need_an_autocast_precision(compose_cfg):
    dali = ["data=dali", "data.root=/data/imagenet", "data.dali.output_dtype=float16"]
    with pytest.raises(ConfigError, match=r"^data\.dali\.output_dtype=float16 needs an autocast precision .*"
                                          r"not precision=fp32; use data\.dali\.output_dtype=auto or float32$"):
        validate(compose_cfg([*dali, "precision=fp32"]))
    validate(compose_cfg([*dali, "precision=bf16"]))
    # The other pipelines ignore data.dali, as every pipeline-specific key elsewhere.
    validate(compose_cfg(["data.dali.output_dtype=float16", "precision=fp32"]))


@pytest.mark.parametrize("key", ["stream_policy=single", "concurrency=none"])
def test_dali_dynamic_executor_keys_need_its_executor(compose_cfg, key):
    with pytest.raises(ConfigError, match=rf"^data\.dali\.{key} applies to DALI's dynamic executor, which "
                                          r"data\.dali\.cpu_prefetch_queue_depth turns off; set one of them only$"):
        validate(compose_cfg(["data.dali.cpu_prefetch_queue_depth=2", f"data.dali.{key}"]))
    with pytest.raises(ConfigCompositionException, match="stream_policy"):
        compose_cfg(["data.dali.stream_policy=fastest"])


def test_the_decoded_image_cache_is_refused_beside_a_cpu_share(compose_cfg):
    with pytest.raises(ConfigError, match=r"^data\.dali\.cache_size_mb=512 caches what the GPU decodes, and "
                                          r"data\.dali\.cpu_decode_share=0\.5 sends images past it to the CPU: "
                                          r"set data\.dali\.cpu_decode_share=0 with the cache, or "
                                          r"data\.dali\.cache_size_mb=0$"):
        validate(compose_cfg(["data.dali.cache_size_mb=512", "data.dali.cpu_decode_share=0.5"]))
    validate(compose_cfg(["data.dali.cache_size_mb=512", "data.dali.cpu_decode_share=0"]))
    # a CPU share beside a size out of range: the range is what is said
    with pytest.raises(ConfigError, match=r"^data\.dali\.cache_size_mb=-1 is out of range"):
        validate(compose_cfg(["data=dali", "data.root=/data/imagenet", "data.dali.cache_size_mb=-1",
                              "data.dali.cpu_decode_share=0.25"]))


def test_profilers_add_their_steps_after_the_measured_windows(compose_cfg):
    assert profiled_steps(compose_cfg(["profiler=simple"])) == 0
    assert profiled_steps(compose_cfg(["profiler=pytorch", "profiler.wait=0"])) == 0 + 2 + 5
    assert profiled_steps(compose_cfg(["profiler=ncu", "profiler.steps=4"])) == 4


def test_a_bad_int_names_the_key(compose_cfg):
    # data.batch_size is typed Any (an int or auto), so validate() checks it; other ints fail at compose.
    with pytest.raises(ConfigError, match=r"^data\.batch_size=lots: use a positive integer or auto$"):
        validate(compose_cfg(["data.batch_size=lots"]))
    with pytest.raises(ConfigCompositionException) as info:
        compose_cfg(["data.image_size=lots"])
    assert isinstance(info.value.__cause__, ValidationError)
    assert "data.image_size" in one_line(info.value)
