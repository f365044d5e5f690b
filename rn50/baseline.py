"""A bare PyTorch training loop with rn50's settings, to measure what the framework costs.

No Lightning, Hydra or MLflow: the same torchvision network, channels_last,
fused SGD, autocast and loss scaling, and the same synthetic device-resident
batch, timed as rn50 times it (warm-up, then a window synced at its edges).

    python -m rn50.baseline --arch resnet50 --precision amp --batch-size 256
    torchrun --standalone --nproc-per-node 4 -m rn50.baseline   # DDP, one process per GPU
"""

import argparse
import json
import os
import statistics
import time

import torch

from rn50.model import build_network, build_optimizer
from rn50.precision import StaticGradScaler, set_math_mode
from rn50.schema import OptimConfig, PrecisionName

AUTOCAST = {"amp": torch.float16, "amp_static": torch.float16, "bf16": torch.bfloat16}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m rn50.baseline")
    p.add_argument("--arch", default="resnet50")
    p.add_argument("--precision", default="amp", choices=[n.value for n in PrecisionName])
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile-mode", default="default",
                   choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
    p.add_argument("--conv-1x1-as-mm", action="store_true",
                   help="inductor lowers 1x1 convolutions to matmuls it can fuse with their neighbours")
    p.add_argument("--cuda-graph", action="store_true",
                   help="capture the whole step (forward, backward, optimizer) in one CUDA graph and replay it")
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    p.add_argument("--loss-scale", type=float, default=1024.0)
    args = p.parse_args(argv)

    world = int(os.environ.get("WORLD_SIZE", 1))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    if world > 1:
        torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo")
    set_math_mode(PrecisionName(args.precision))
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    net = build_network(args.arch, 1000, args.channels_last).to(device)
    model = net
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            net, device_ids=[device.index] if device.type == "cuda" else None,
            gradient_as_bucket_view=True)
    if args.conv_1x1_as_mm:
        import torch._inductor.config as inductor

        inductor.conv_1x1_as_mm = True
    model = torch.compile(model, mode=args.compile_mode) if args.compile else model
    opt = build_optimizer(net.parameters(), OptimConfig(), fused=device.type == "cuda")
    dtype = AUTOCAST.get(args.precision)
    scaler = None
    if args.precision == "amp":
        scaler = torch.amp.GradScaler(device.type)
    elif args.precision == "amp_static":
        scaler = StaticGradScaler(device.type, init_scale=args.loss_scale)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    if args.channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (args.batch_size,), device=device)
    criterion = torch.nn.CrossEntropyLoss()

    def step():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = criterion(model(images), labels)
        opt.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup_steps):
        step()
    if args.cuda_graph:
        step = capture(step, device)
    rates = []
    for _ in range(args.repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync()
        seconds = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)
        if world > 1:  # the slowest rank's window, as rn50 reports it
            torch.distributed.all_reduce(seconds, op=torch.distributed.ReduceOp.MAX)
        rates.append(args.batch_size * world * args.steps / seconds.item())
    result = {"baseline": "bare_pytorch", **vars(args), "world_size": world,
              "images_per_sec": statistics.median(rates), "images_per_sec_windows": rates}
    if int(os.environ.get("RANK", 0)) == 0:
        print(json.dumps(result))
    if world > 1:
        torch.distributed.destroy_process_group()
    return result


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
        step()
    return graph.replay


if __name__ == "__main__":
    main()
