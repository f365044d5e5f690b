"""Issue-14 exploration: many data.dali settings against one compiled training step, in one process.

rn50's runs compile the model anew for each setting; here the step is built (and compiled) once,
then each setting gets a fresh DALI pipeline, 20 warm-up steps and a 100-step window synced at its
edges, as rn50.baseline times it, followed by the same pipeline alone (decode only). A synthetic
window before and after the settings is the reference. With --trace, each setting is also
profiled with torch.profiler over --trace-steps steps: device time per CUDA stream (training's and DALI's),
how much of it overlaps, and the top kernels of each stream. One JSON line per window on stdout.
Every setting trains on one stream: one of its own at --train-stream-priority, or torch's default
stream without it; data.dali.training_stream, which rn50's ranks and rn50.baseline follow, does not
apply here.

    python benchmarks/dali_levers.py --data-root /tmp/imagenet --batch-size 512 --compile \
        --compile-mode reduce-overhead --trace /tmp/out "" hw_decoder_load=0.99 stream_policy=single
"""

import argparse
import collections
import gc
import gzip
import json
import time

import torch

from rn50.baseline import COMPILE_MODES, PRECISIONS, build_train_step, dali_batches, dali_config
from rn50.precision import set_math_mode
from rn50.profile import Span, union_us


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def window(step, steps: int, warmup: int) -> float:
    """Seconds of `steps` steps after `warmup` untimed ones, synced at the window's edges only."""
    for _ in range(warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return time.perf_counter() - t0


def labelled_step(train, batches) -> None:
    """One step, its host time split into waiting for the batch and launching the step's work."""
    with torch.profiler.record_function("next_batch"):
        batch = next(batches)
    with torch.profiler.record_function("train_step"):
        train(*batch)


def stream_report(trace_path: str) -> dict:
    """Per CUDA stream: device-work ms, ms overlapped with other streams' work, top kernels."""
    with gzip.open(trace_path, "rt") if trace_path.endswith(".gz") else open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    work = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not work:
        return {}
    lo, hi = min(e["ts"] for e in work), max(e["ts"] + e["dur"] for e in work)
    by_stream = collections.defaultdict(list)
    for e in work:
        by_stream[e["args"].get("stream", e.get("tid"))].append(e)
    report = {"window_ms": (hi - lo) / 1e3,
              "busy_ms": union_us([Span("", e["ts"], e["ts"] + e["dur"]) for e in work], lo, hi) / 1e3}
    for stream, evs in sorted(by_stream.items(), key=lambda kv: -sum(e["dur"] for e in kv[1])):
        mine = [Span("", e["ts"], e["ts"] + e["dur"]) for e in evs]
        others = [Span("", e["ts"], e["ts"] + e["dur"]) for e in work if e["args"].get("stream", e.get("tid")) != stream]
        alone = union_us(mine + others, lo, hi) - union_us(others, lo, hi)
        names = collections.Counter()
        for e in evs:
            names[e["name"][:90]] += e["dur"]
        report[f"stream_{stream}"] = {
            "events": len(evs), "busy_ms": union_us(mine, lo, hi) / 1e3, "alone_ms": alone / 1e3,
            "top": [[n, round(us / 1e3, 2)] for n, us in names.most_common(6)]}
    return report


def main():
    p = argparse.ArgumentParser()
    p.add_argument("settings", nargs="+", help='comma-separated data.dali key=value sets; "" for the defaults')
    p.add_argument("--data-root", required=True)
    p.add_argument("--arch", default="resnet50")
    p.add_argument("--precision", default="amp", choices=PRECISIONS)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--compile-mode", default="default", choices=COMPILE_MODES)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--trace", help="folder for each setting's trace; its per-stream report joins its line")
    p.add_argument("--trace-steps", type=int, default=10, help="steps each trace records")
    p.add_argument("--train-stream-priority", type=int,
                   help="train on a CUDA stream of its own at this priority (lower is sooner: -1 is high) "
                        "instead of torch's default stream")
    args = p.parse_args()
    if args.train_stream_priority is not None and torch.cuda.is_available():
        with torch.cuda.stream(torch.cuda.Stream(priority=args.train_stream_priority)):
            run(args)
    else:
        run(args)


def run(args):
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    set_math_mode(args.precision != "fp32")
    torch.backends.cudnn.benchmark = True
    train = build_train_step(args.arch, args.precision, device,
                             image_size=args.image_size, compile_mode=args.compile_mode if args.compile else None)
    images, labels = train.batch(args.batch_size)

    def report(name, seconds, **extra):
        print(json.dumps({"setting": name, "images_per_sec": args.batch_size * args.steps / seconds, **extra}),
              flush=True)

    report("synthetic", window(lambda: train(images, labels), args.steps, args.warmup_steps))
    for setting in args.settings:
        ns = argparse.Namespace(data_root=args.data_root, batch_size=args.batch_size, image_size=args.image_size,
                                precision=args.precision, loss_scale=1024.0, channels_last=True,
                                dali=[s for s in setting.split(",") if s])
        try:
            batches = dali_batches(dali_config(ns, device), device, 0, 1)
            seconds = window(lambda: train(*next(batches)), args.steps, args.warmup_steps)
            extra = {}
            if args.trace:
                activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
                with torch.profiler.profile(activities=activities[:1 + (device.type == "cuda")]) as prof:
                    window(lambda: labelled_step(train, batches), args.trace_steps, 0)
                path = f"{args.trace}/trace_{setting or 'defaults'}.json.gz".replace("=", "_").replace(",", "_")
                prof.export_chrome_trace(path)
                extra["streams"] = stream_report(path)
            decode = window(lambda: next(batches), 40, 5)
            report(setting or "defaults", seconds, decode_only_images_per_sec=args.batch_size * 40 / decode, **extra)
        except Exception as exc:  # one failing setting leaves the others to run
            print(json.dumps({"setting": setting, "error": str(exc).splitlines()[0][:300]}), flush=True)
        batches = None
        gc.collect()
    report("synthetic_again", window(lambda: train(images, labels), args.steps, args.warmup_steps))


if __name__ == "__main__":
    main()
