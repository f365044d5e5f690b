"""How a rank builds its Trainer, and one rank run in this process."""

import contextlib
import io
import pickle
import re
import warnings

import pytest
import torch
from torch import nn

from helpers import TINY
from rn50.launcher.launch import preflight
from rn50.profiling.ncu_range import NcuRange
from rn50.profiling.nvtx import NvtxRanges
from rn50.profiling.torch_profile import TorchProfile
from rn50.rank.run import run_rank
from rn50.rank.trainer import build_trainer, profiling_callbacks
from rn50.recipe.train_step import build_train_step
from rn50.options.components import Options
from rn50.point.validate import validate
from rn50.rank.throughput import ThroughputCallback


def test_trainer_has_no_per_step_sigterm_sync(compose_cfg, tmp_path):
    cfg = validate(compose_cfg(TINY + ["dist=1n2g", "bench.repeats=3"]))
    timer = ThroughputCallback(cfg.bench, cfg.telemetry, "cpu", cfg.data.batch_size)
    trainer = build_trainer(cfg, "cpu", [timer], timer.timer.total_steps, tmp_path, Options.of(cfg))
    loop = trainer.fit_loop.epoch_loop
    # Lightning's method would broadcast and .item() every DDP step; the instance's own replaces it.
    assert "_broadcast_sigterm_tensor" in vars(loop) and loop._broadcast_sigterm_tensor() is None
    assert trainer.max_steps == cfg.bench.warmup_steps + 3 * cfg.bench.steps
    assert trainer.logger is None and not trainer.checkpoint_callback


@pytest.mark.parametrize("override,chosen", [([], True), (["model.cudnn_benchmark=false"], False)])
def test_cudnn_benchmark_follows_the_config(compose_cfg, tmp_path, monkeypatch, override, chosen):
    """model.cudnn_benchmark reaches torch through the Trainer that rn50 builds (issue 42: cuDNN's timing of
    candidate algorithms was seconds of a start's first step)."""
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", not chosen)  # torch's flag is restored after
    cfg = validate(compose_cfg(TINY + override))
    timer = ThroughputCallback(cfg.bench, cfg.telemetry, "cpu", cfg.data.batch_size)
    build_trainer(cfg, "cpu", [timer], timer.timer.total_steps, tmp_path, Options.of(cfg))
    assert torch.backends.cudnn.benchmark is chosen


@pytest.mark.parametrize("override,broadcast", [([], False), (["dist.broadcast_buffers=true"], True)])
def test_ddp_broadcasts_buffers_only_when_asked(compose_cfg, tmp_path, one_rank_group, override, broadcast):
    """dist.broadcast_buffers reaches the DDP module rn50's strategy builds (issue 44: its per-step copies
    waited behind nvJPEG's device sync); the bare loop's step takes the same setting."""
    cfg = validate(compose_cfg(TINY + ["dist=1n2g", *override]))
    timer = ThroughputCallback(cfg.bench, cfg.telemetry, "cpu", cfg.data.batch_size)
    trainer = build_trainer(cfg, "cpu", [timer], timer.timer.total_steps, tmp_path, Options.of(cfg))
    with warnings.catch_warnings():
        # torch 2.13 and later deprecate broadcast_buffers (FutureWarning) for forward_sync_buffers: rn50 passes
        # the keyword the installed torch takes.
        warnings.simplefilter("error", FutureWarning)
        ddp = trainer.strategy._setup_model(nn.BatchNorm1d(2))
        step = build_train_step("resnet18", "fp32", torch.device("cpu"), image_size=32, channels_last=False,
                                ddp=True, broadcast_buffers=cfg.dist.broadcast_buffers)
    assert ddp.broadcast_buffers is broadcast and step.model.broadcast_buffers is broadcast


def test_profiled_steps_come_after_the_measured_ones(compose_cfg, tmp_path):
    cfg = validate(compose_cfg(TINY + ["profiler=pytorch"]))
    timer = ThroughputCallback(cfg.bench, cfg.telemetry, "cpu", cfg.data.batch_size)
    (profile,) = [cb for cb in profiling_callbacks(cfg, "cpu", timer.timer.total_steps, tmp_path, Options.of(cfg))
                  if isinstance(cb, TorchProfile)]
    assert profile.first_step == timer.timer.total_steps


def test_nvtx_ranges_only_on_gpus_and_when_asked(compose_cfg, tmp_path):
    def kinds(overrides, device_type):
        cfg = compose_cfg(TINY + overrides)
        return [type(cb) for cb in profiling_callbacks(cfg, device_type, 3, tmp_path, Options.of(cfg))]

    assert kinds([], "cuda") == [NvtxRanges] and kinds([], "cpu") == []
    assert kinds(["profiler.nvtx=false"], "cuda") == []
    assert kinds(["profiler=ncu"], "cuda") == [NvtxRanges, NcuRange]


def test_one_rank_in_this_process(compose_cfg, tmp_path):
    """The fast smoke test of a rank: every measured step is in the result rank 0 returns."""
    cfg = preflight(compose_cfg(TINY + ["precision=fp32", "bench.repeats=2"])).cfg  # as the launcher hands it on
    (zero,) = run_rank(cfg, tmp_path)
    assert [len(w.step_ms) for w in zero.windows] == [2, 2]
    assert all(w.seconds > 0 for w in zero.windows) and zero.first_step_at > 0
    assert zero.flops_per_image > 0 and zero.env_tags["accelerator"] == "cpu"
    assert zero.process_cpu_pct > 0 and zero.cpu_cores >= 1
    # The launcher unpickles this, and never imports torch: no class of torch's (or numpy's) is in it.
    modules = set()

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            modules.add(module)
            return super().find_class(module, name)

    Unpickler(io.BytesIO(pickle.dumps(zero))).load()
    assert modules <= {"rn50.wire", "rn50.measure.timing", "builtins", "pathlib"}, modules


def test_the_rank_builds_and_trains_inside_its_pipelines_stream(compose_cfg, tmp_path, monkeypatch):
    """Model weights, batches and steps all on the stream the pipeline chose (data=dali's own
    one on GPUs): nothing the rank queues crosses streams unordered."""
    from rn50.options import pipelines
    from rn50.rank import run as rank

    inside, seen = [], []

    @contextlib.contextmanager
    def recording(self, cfg):
        inside.append(True)
        yield
        inside.pop()

    class Module(rank.ResNetModule):
        def __init__(self, *args):
            seen.append(("built", bool(inside)))
            super().__init__(*args)

        def on_train_start(self):
            seen.append(("trained", bool(inside)))

    monkeypatch.setattr(pipelines.Synthetic, "training_stream", recording)
    monkeypatch.setattr(rank, "ResNetModule", Module)
    cfg = preflight(compose_cfg(TINY + ["precision=fp32"])).cfg  # as the launcher hands it on
    run_rank(cfg, tmp_path)
    assert seen == [("built", True), ("trained", True)] and not inside


def test_a_rank_makes_its_own_gpu_current_as_lightning_will_pick_it(compose_cfg, monkeypatch):
    """Its stream and the batch search are made on that GPU, before Lightning sets it in fit."""
    from rn50.wire import POOL_ENV
    from rn50.rank.trainer import local_gpu

    def configured(overrides=()):
        cfg = compose_cfg(list(overrides))
        return cfg, Options.of(cfg)

    for var in (POOL_ENV, "LOCAL_RANK", "SLURM_LOCALID", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    assert local_gpu(*configured()) == 0  # one process of its own
    monkeypatch.setenv(POOL_ENV, "7")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert local_gpu(*configured(["dist=1n2g"])) == 1  # rn50's pool
    monkeypatch.delenv(POOL_ENV)
    monkeypatch.setenv("SLURM_LOCALID", "3")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "4")
    assert local_gpu(*configured(["cluster=slurm", "dist.gpus_per_node=4"])) == 3  # SLURM sets no LOCAL_RANK


@pytest.mark.slow
def test_an_oom_after_the_batch_search_names_the_batch_the_search_chose(compose_cfg, tmp_path, monkeypatch):
    """The rank's config still says auto (it hands the batch on in a copy of its own): the task's failure names
    the batch the search chose, as the sweep report's error cell shows it."""
    from omegaconf import OmegaConf

    from rn50.rank import batch_search
    from rn50.rank import run as rank
    from rn50.wire import Failed, Task

    small = batch_search.Limits(start=2, max_batch=4, multiple=2, warmup_steps=1, steps=1, step_budget=8)
    monkeypatch.setattr(batch_search, "limits_for", lambda device_type: small)

    def out_of_memory(*args, **kwargs):  # the first step at the chosen batch, as a GPU would refuse it
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(rank, "build_trainer", out_of_memory)
    cfg = preflight(compose_cfg(TINY + ["data.batch_size=auto", f"mlflow.tracking_uri=sqlite:///{tmp_path}/m.db"])).cfg
    reply = rank.answer(Task(OmegaConf.to_yaml(cfg, resolve=True), str(tmp_path)))
    assert isinstance(reply, Failed) and reply.kind == "oom"
    assert re.match(r"oom at data\.batch_size=[24]: CUDA out of memory", reply.message), reply.message
    assert rank._batch_chosen is None  # the next task of a warm rank starts without it


@pytest.mark.slow  # three rank runs
def test_a_rank_marks_its_compile_once_its_run_finished(compose_cfg, tmp_path, monkeypatch):
    """rn50/rank/warm_compile.py in a rank's run: it looks for its mark before the run and leaves one
    after a run that finished, so the next run of these settings loads its kernels in-process on torch
    2.11 (a GPU path: here its place in the run, on the CPU)."""
    from torch._inductor import config as inductor

    from rn50.rank import run as rank, warm_compile

    monkeypatch.setattr(warm_compile, "affected", lambda cfg: True)
    monkeypatch.setattr(warm_compile, "this_device", lambda: "a test device")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("use_static_cuda_launcher", "compile_threads"):
        monkeypatch.setattr(inductor, name, getattr(inductor, name))
    found, prepare, measure = [], warm_compile.prepare, rank.measure_rank
    monkeypatch.setattr(warm_compile, "prepare", lambda cfg: found.append(prepare(cfg)) or found[-1])
    cfg = preflight(compose_cfg(TINY)).cfg

    def fails(*args):
        raise RuntimeError("a step failed")

    monkeypatch.setattr(rank, "measure_rank", fails)
    with pytest.raises(RuntimeError):
        run_rank(cfg, tmp_path / "failed")
    monkeypatch.setattr(rank, "measure_rank", measure)
    run_rank(cfg, tmp_path / "first")  # a failed run left no mark: still cold
    run_rank(cfg, tmp_path / "second")
    assert found == [False, False, True] and inductor.compile_threads == 1
