"""A bare PyTorch training loop with rn50's settings, to measure what the framework costs.

It shares rn50's recipe and timing on purpose, and leaves out the framework around them: no Lightning
Trainer or DDP strategy, no launcher, pool or MLflow. The step is rn50/recipe/train_step.py's (the same
torchvision network, channels_last, fused SGD, autocast and loss scaling; DDP as plain PyTorch wraps it
under torchrun), which the batch search (rn50/rank/batch_search.py) probes with too, on the same synthetic
device-resident batch; the windows are rn50/measure/timing.py's WindowTimer, as a rank's (warm-up, then
windows synced at their edges). So its ratio to rn50 is what the framework costs. On a GPU with an NVML
energy counter it also reports images per joule over the windows. Hydra only composes data=dali's keys
for --data-root.
With --data-root the batches come from rn50's DALI pipeline (data=dali) instead: the bare DALI
loop, or with --decode-only the pipeline alone, with no training.

    python -m rn50.baseline --arch resnet50 --precision amp --batch-size 256
    torchrun --standalone --nproc-per-node 4 -m rn50.baseline   # DDP, one process per GPU
    python -m rn50.baseline --data-root /data/imagenet --dali hw_decoder_load=0.99
"""

import argparse
import contextlib
import gc
import json
import math
import os
import statistics
from pathlib import Path
from typing import Callable, Iterator, Optional

import torch
import torch._inductor.config as inductor
from hydra import compose, initialize_config_dir

from rn50.config.directory import config_dir
from rn50.config.messages import one_line
from rn50.config.reads import decided
from rn50.config.schema import CompileDDP, CompileMode
from rn50.launcher.launch import num_classes
from rn50.measure import comm, nvml, settings
from rn50.measure.device import DeviceClock, allreduce_ms, gradient_bytes, handle_for_cuda_device, transport
from rn50.measure.timing import WindowTimer, host_lead
from rn50.options.components import Options
from rn50.point.validate import validate
from rn50.profiling import torch_profile
from rn50.recipe.model import configure_compile
from rn50.recipe.precision import set_math_mode
from rn50.recipe.train_step import build_train_step

# rn50's built-in precisions (conf/precision/), written out so that --help composes no config.
PRECISIONS = ["fp32", "tf32", "amp", "amp_static", "bf16"]
COMPILE_MODES = [m.value for m in CompileMode]  # model.compile_mode's, from the schema


def main(argv=None) -> dict:
    settings.set_cuda_connections()  # as rn50's ranks do, before CUDA starts
    p = argparse.ArgumentParser(prog="python -m rn50.baseline")
    p.add_argument("--arch", default="resnet50")
    p.add_argument("--precision", default="amp", choices=PRECISIONS)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile-mode", default="default", choices=COMPILE_MODES,
                   help="with --compile; reduce-overhead is what rn50's model.cuda_graphs=true runs")
    p.add_argument("--autotune-pointwise", action="store_true",
                   help="with --compile: rn50's model.autotune_pointwise=true")
    p.add_argument("--autotune-coordinate-descent", action="store_true",
                   help="with --compile: rn50's model.autotune_coordinate_descent=true")
    p.add_argument("--compile-ddp", default=CompileDDP.ddp_optimizer.value, choices=[m.value for m in CompileDDP],
                   help="with --compile under torchrun: rn50's model.compile_ddp")
    p.add_argument("--broadcast-buffers", action="store_true",
                   help="under torchrun: DDP copies rank 0's batch-norm statistics to every rank each step "
                        "(torch's default; rn50's dist.broadcast_buffers=true)")
    p.add_argument("--conv-1x1-as-mm", action="store_true",
                   help="inductor lowers 1x1 convolutions to matmuls it can fuse with their neighbours")
    p.add_argument("--cuda-graph", action="store_true",
                   help="capture the whole step (forward, backward, optimizer) in one CUDA graph and replay it")
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    p.add_argument("--no-cudnn-benchmark", dest="cudnn_benchmark", action="store_false",
                   help="cuDNN's heuristic convolution algorithms, as model.cudnn_benchmark=false")
    p.add_argument("--loss-scale", type=float, default=1024.0)
    p.add_argument("--comm-iters", type=int, default=20, metavar="N",
                   help="under torchrun: before the warm-up and after the windows, time N all-reduces of the "
                        "gradients' size as rn50's ranks do (comm/allreduce_before_ms, comm/allreduce_ms, "
                        "comm/busbw_GBps, transport: rn50's bench.comm_iters); 0: none")
    p.add_argument("--data-root", help="train on ROOT/train's JPEGs through rn50's DALI pipeline (data=dali)")
    p.add_argument("--decode-only", action="store_true",
                   help="with --data-root: take batches from the pipeline and train nothing, to measure it alone")
    p.add_argument("--profile-dir", metavar="DIR",
                   help="after the windows, record --profile-steps more steps with torch.profiler on every rank: "
                        "DIR/trace-rankN.json.gz and the profile/ metrics of rn50's profiler=pytorch")
    p.add_argument("--profile-steps", type=int, default=5, metavar="N")
    p.add_argument("--dali", action="append", default=[], metavar="KEY=VALUE",
                   help="with --data-root: a data.dali key, e.g. hw_decoder_load=0.99 (repeatable); "
                        "the rest as data=dali sets them (6 threads, the hardware decoder, none on the CPU)")
    args = p.parse_args(argv)
    if args.data_root is None and (args.decode_only or args.dali):
        p.error("--decode-only and --dali need --data-root")
    if (args.autotune_pointwise or args.autotune_coordinate_descent) and not args.compile:
        p.error("--autotune-pointwise and --autotune-coordinate-descent tune torch.compile's kernels: add --compile")
    if args.compile_ddp != CompileDDP.ddp_optimizer.value and not args.compile:
        p.error(f"--compile-ddp {args.compile_ddp} sets how torch.compile splits the graph for DDP: add --compile")
    if args.comm_iters < 0:
        p.error("--comm-iters must be 0 (time no all-reduce) or more (nccl-tests times 20)")
    if args.warmup_steps < 1:
        p.error("--warmup-steps must be 1 or more: the window's first edge follows a step, whose loss it reads")
    if args.data_root is not None and args.cuda_graph:
        p.error("--cuda-graph replays one batch's addresses, so it cannot take batches from --data-root")

    world = int(os.environ.get("WORLD_SIZE", 1))
    if args.cuda_graph and world > 1:
        # Capture failed on 2 H200s ("operation would make the legacy stream depend on a capturing blocking
        # stream", docs/benchmarks.md, fourteenth session): torch's DDP must be built on a side stream and run
        # 11 eager steps before a whole-step capture, which this loop does not do.
        p.error(f"--cuda-graph captures one process's whole step; under torchrun (WORLD_SIZE={world}) DDP's "
                "capture is not supported here: run it on one GPU, or use --compile --compile-mode reduce-overhead")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    on_stream = contextlib.ExitStack()
    if args.data_root is not None:
        try:
            cfg, pipeline = dali_config(args, device)
        except Exception as exc:  # a bad --dali key or value, named as rn50 names it
            p.error(one_line(exc))
        # rn50's ranks train on this stream from their first device work: data.dali.training_stream.
        on_stream.enter_context(pipeline.training_stream(cfg))
    if world > 1:
        comm.log_transports()  # as rn50's ranks do, before NCCL starts: its log names the transport
        torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo")
    set_math_mode(args.precision != "fp32")
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    torch.manual_seed(0)
    if args.conv_1x1_as_mm:
        inductor.conv_1x1_as_mm = True
    configure_compile(args.autotune_pointwise, args.autotune_coordinate_descent, args.compile_ddp)
    options = dict(image_size=args.image_size, channels_last=args.channels_last,
                   compile_mode=args.compile_mode if args.compile else None, loss_scale=args.loss_scale,
                   ddp=world > 1, broadcast_buffers=args.broadcast_buffers)
    train = None  # the step, where the loop trains (not --decode-only)
    if not args.decode_only:
        # With --data-root the head has an output per class folder, as rn50's runs size it (model.num_classes=null).
        head = {} if args.data_root is None else dict(num_classes=cfg.model.num_classes)
        train = build_train_step(args.arch, args.precision, device, **options, **head)
    # The network as the loop found it, before its input starts (making DALI's iterator starts its threads).
    before_ms = slowest_allreduce_ms(train, args, device, world)
    if args.data_root is None:  # one device-resident batch, as data=synthetic
        images, labels = train.batch(args.batch_size)
        step = lambda: train(images, labels)  # noqa: E731
    else:
        try:
            batches = dali_batches(cfg, pipeline, device, int(os.environ.get("RANK", 0)), world)
        except Exception as exc:  # the pipeline cannot start (no files, bad device), named as rn50 names it
            p.error(one_line(exc))
        step = (lambda: next(batches)) if args.decode_only else (lambda: train(*next(batches)))  # noqa: E731
    energy = energy_counter(device)
    rates, joules, edge_losses = [], [], []
    mj0 = None  # the energy counter where the open window started

    def at_edge(k: int) -> None:
        """Edge k of the windows, after its sync and outside every window: close window k-1 (the
        slowest rank's seconds, every GPU's energy), then open window k. The loss of the step the
        edge follows is read at each window's start and end."""
        nonlocal step, mj0
        if k > 0:
            mj1 = energy()
            edge_losses.append(float(loss) if train else None)
            edge = torch.tensor([timer.windows[-1].seconds,
                                 (mj1 - mj0) / 1e3 if None not in (mj0, mj1) else float("nan")],
                                dtype=torch.float64, device=device)
            if world > 1:
                torch.distributed.all_reduce(edge[:1], op=torch.distributed.ReduceOp.MAX)
                torch.distributed.all_reduce(edge[1:], op=torch.distributed.ReduceOp.SUM)
            rates.append(args.batch_size * world * args.steps / edge[0].item())
            joules.append(edge[1].item())
        if k < args.repeats:
            if k == 0 and args.cuda_graph:  # captured after the warm-up, before any window
                step = capture(step, device)
                torch.cuda.synchronize()
            mj0 = energy()
            edge_losses.append(float(loss) if train else None)

    timer = WindowTimer(args.warmup_steps, args.steps, args.repeats, DeviceClock(device.type), on_edge=at_edge)
    for _ in range(timer.total_steps):
        loss = step()
        timer.step_end()
    profile = profiled(step, args, device) if args.profile_dir else {}
    profile.update(communication(train, args, device, world, before_ms))
    images = args.batch_size * world * args.steps * args.repeats
    measured = all(j == j for j in joules)  # NaN where a GPU has no energy counter
    result = {"baseline": "bare_pytorch", **vars(args), "world_size": world,
              "images_per_sec": statistics.median(rates), "images_per_sec_windows": rates,
              "energy_joules_windows": joules if measured else None,
              "images_per_joule": images / sum(joules) if measured else None,
              **host_lead(timer.windows)}
    if train:
        result.update(proof(edge_losses, train.scaler, args))
    result.update(profile)
    if int(os.environ.get("RANK", 0)) == 0:
        print(json.dumps(result))
    trained = train is not None
    if world > 1:
        # DDP holds the process group: let go of the step first, or the group outlives
        # destroy_process_group and gloo's threads are torn down at interpreter exit, which aborted
        # ranks now and then on a loaded 2-core machine (std::terminate).
        del step, train, timer, at_edge
        gc.collect()
        torch.distributed.destroy_process_group()
    on_stream.close()
    if trained and not math.isfinite(edge_losses[-1]):
        p.exit(1, f"{p.prog}: error: training diverged: loss {edge_losses[-1]} at the last window's end; "
                  "its images/sec is no training figure\n")
    if result.get("skipped_steps_window") == args.steps * args.repeats:
        p.exit(1, f"{p.prog}: error: training stalled: the loss scaler skipped all {args.steps * args.repeats} "
                  "measured steps; its images/sec is no training figure (lower --loss-scale)\n")
    return result


def slowest_allreduce_ms(train, args, device: torch.device, world: int) -> Optional[float]:
    """Under torchrun, outside the windows: one all-reduce of the gradients' size timed alone, as rn50's ranks
    time theirs (rn50/measure/comm.py), the slowest rank's; None for one process, --comm-iters 0, or
    --decode-only."""
    if world < 2 or args.comm_iters < 1 or train is None:
        return None
    ms = torch.tensor([allreduce_ms(gradient_bytes(train.net), device, args.comm_iters)], dtype=torch.float64,
                      device=device)
    torch.distributed.all_reduce(ms, op=torch.distributed.ReduceOp.MAX)
    return ms.item()


def communication(train, args, device: torch.device, world: int, before_ms: Optional[float]) -> dict:
    """After the windows: the all-reduce timed again, beside before_ms (timed before the warm-up), and the
    transport NCCL chose. Beside rn50's figure it tells a slower network from a slower step: over sockets
    the network's speed moves between runs and within one (docs/benchmarks.md, nineteenth and twentieth
    sessions)."""
    ms = slowest_allreduce_ms(train, args, device, world)
    if ms is None:
        return {}
    every = [None] * world  # each rank's log names only its own channels: joined, as a run's ranks are
    handle = nvml_handle(device) if device.type == "cuda" else None
    torch.distributed.all_gather_object(every, transport(device.type, handle))
    return {**comm.allreduce_metrics(ms, before_ms, gradient_bytes(train.net), world), "transport": comm.joined(every)}


def profiled(step, args, device) -> dict:
    """--profile-steps steps after the windows under torch.profiler, synchronized at both ends as
    rn50's profiler=pytorch records them; this rank's trace, and its profile/ metrics."""
    rank = int(os.environ.get("RANK", 0))
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    schedule = torch.profiler.schedule(wait=0, warmup=2, active=args.profile_steps, repeat=1)
    with torch.profiler.profile(activities=activities, schedule=schedule) as prof:
        for k in range(2 + args.profile_steps):
            if k == 2:
                sync()  # the recorded steps start from an idle device
            step()
            if k == 1 + args.profile_steps:
                sync()
            prof.step()
    out = Path(args.profile_dir)
    out.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(out / f"trace-rank{rank}.json.gz"))
    events = prof.events()
    work = torch_profile.device_work(events) if device.type == "cuda" else torch_profile.host_work(events)
    return torch_profile.profile_metrics(work, torch_profile.step_window(events), args.profile_steps)


def proof(edge_losses, scaler, args) -> dict:
    """That the bare loop trained, as rn50's runs prove it (rn50/measure/trained.py): the loss at the
    windows' edges (read there, after the sync), the steps the scaler skipped, its final scale.
    A captured CUDA graph replays the scaler without Python, so its skips are not counted."""
    out = {"loss_first": edge_losses[0], "loss_last": edge_losses[-1], "loss_window_edges": edge_losses,
           "loss_fell": edge_losses[-1] < edge_losses[0]}
    if scaler is not None:
        out["loss_scale_final"] = float(scaler.get_scale())  # --loss-scale is the fixed one asked for
        if not args.cuda_graph:
            flags = scaler.take_skipped()
            out["skipped_steps"] = sum(flags)
            out["skipped_steps_window"] = sum(flags[len(flags) - args.steps * args.repeats:])
    return out


def dali_config(args, device: torch.device):
    """rn50's config of a data=dali run with args' settings and data.dali keys, composed and
    checked as rn50 composes and checks a run; and its pipeline object, built once."""
    overrides = ["data=dali", f"data.root={args.data_root}", f"data.batch_size={args.batch_size}",
                 f"data.image_size={args.image_size}", f"precision={args.precision}",
                 f"model.channels_last={args.channels_last}", "mlflow.tracking_uri=unused",
                 f"dist.accelerator={'gpu' if device.type == 'cuda' else 'cpu'}",
                 *[f"data.dali.{option}" for option in args.dali]]
    if args.precision == "amp_static":
        overrides.append(f"precision.loss_scale={args.loss_scale}")
    with initialize_config_dir(config_dir=config_dir(), version_base=None):
        cfg = compose("config", overrides=overrides)
    options = Options.of(cfg)
    validate(cfg, options)
    return decided(cfg, {"model.num_classes": num_classes(cfg, options.data)}), options.data


def dali_batches(cfg, pipeline, device: torch.device, rank: int, world: int) -> Iterator:
    """The config's data=dali pipeline for this rank as an endless stream of (images, labels) in
    the model's dtype and layout on the device."""
    return iter(pipeline.build(cfg, endless=True).loader(device, rank, world))


def energy_counter(device: torch.device) -> Callable[[], Optional[float]]:
    """Reads this GPU's NVML energy counter in millijoules; None on CPUs and GPUs without one."""
    handle = nvml_handle(device) if device.type == "cuda" else None
    return (lambda: nvml.energy_mj(handle)) if handle else (lambda: None)


def nvml_handle(device: torch.device):
    """This GPU's NVML handle; None without NVML's library or driver (no energy or NVLink figure then,
    the timing still stands)."""
    try:
        return handle_for_cuda_device(device.index)
    except Exception:
        return None


def capture(step, device):
    """The step as one CUDA graph: every tensor it touches keeps its address, so replays
    redo the same work with no launches from the host."""
    sync_stream = torch.cuda.Stream(device)
    sync_stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(sync_stream):  # capture needs warmed-up kernels on a side stream
        for _ in range(3):
            step()
    torch.cuda.current_stream(device).wait_stream(sync_stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = step()  # the graph's own output: each replay writes the step's loss into it

    def replay() -> torch.Tensor:
        graph.replay()
        return loss

    return replay


if __name__ == "__main__":
    main()
