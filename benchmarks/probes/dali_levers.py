"""Issue-14 exploration: many data.dali settings against one compiled training step, in one process.

rn50's runs compile the model anew for each setting; here the step is built (and compiled) once,
then each setting gets a fresh DALI pipeline, 20 warm-up steps and a 100-step window synced at its
edges, as rn50.baseline times it, followed by the same pipeline alone (decode only). A synthetic
window before and after the settings is the reference. With --trace, each setting is also
profiled with torch.profiler over --trace-steps steps: device time per CUDA stream (training's and DALI's),
how much of it overlaps, and the top kernels of each stream (the synthetic window's too, as the
reference), the training stream's idle gaps, and the cudaDeviceSynchronize calls of other threads
than the one that queues training (nvJPEG's hardware decoder makes one per batch).
`--trace-activities cuda` records device work and CUDA API calls only, which costs the host almost
nothing, so the eager step stays GPU-bound while traced. With --diagnose, each setting also
reports the host's time per step split into waiting for the batch and queuing the step, Python's
garbage collections, the host's time to queue a step with nothing ahead of it, and a window that
trains on one DALI batch over and over (the batch's layout without DALI running beside it).
One JSON line per window on stdout. A setting is data.dali keys over data=dali's own ("": those
as they are; before issue 14's fifth session they were DALI's own decoder settings).
Every setting trains on one stream: one of its own at --train-stream-priority, or torch's default
stream without it; data.dali.training_stream, which rn50's ranks and rn50.baseline follow, does not
apply here.

    python benchmarks/probes/dali_levers.py --data-root /tmp/imagenet --batch-size 512 --compile \
        --compile-mode reduce-overhead --trace /tmp/out "" hw_decoder_load=0.99 stream_policy=single
"""

import argparse
import collections
import gc
import gzip
import json
import time

import torch

from rn50.tools.baseline import COMPILE_MODES, PRECISIONS, dali_batches, dali_config

from rn50.recipe.train_step import build_train_step
from rn50.recipe.precision import set_math_mode
from rn50.profiling.torch_profile import Span, union_us


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


class HostSplit:
    """One step at a time, with the host's seconds in next(batches) and in launching the step kept,
    and Python's garbage collections longer than 2 ms with the step they paused. Without `train`,
    the pipeline alone."""

    def __init__(self, train, batches):
        self.train, self.batches, self.wait, self.launch, self.gc = train, batches, [], [], []
        self._gc_start = 0.0

    def __enter__(self):
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase, info):
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif (ms := 1e3 * (time.perf_counter() - self._gc_start)) > 2:
            self.gc.append([len(self.wait), info["generation"], round(ms, 1)])

    def __call__(self):
        t0 = time.perf_counter()
        batch = next(self.batches)
        t1 = time.perf_counter()
        if self.train:
            self.train(*batch)
        self.wait.append(t1 - t0)
        self.launch.append(time.perf_counter() - t1)

    def report(self, steps: int, prefix: str = "host") -> dict:
        first = len(self.wait) - steps
        wait, launch = self.wait[first:], self.launch[first:]
        longest = sorted(range(steps), key=lambda i: -wait[i])[:6]
        return {f"{prefix}_wait_ms_total": 1e3 * sum(wait), f"{prefix}_wait_ms_median": 1e3 * sorted(wait)[steps // 2],
                f"{prefix}_wait_ms_longest": [[i, round(1e3 * wait[i], 1)] for i in sorted(longest)],
                f"{prefix}_launch_ms_median": 1e3 * sorted(launch)[steps // 2],
                f"{prefix}_gc_pauses": [[i - first, g, ms] for i, g, ms in self.gc if i >= first]}


def one_batch(train, batch, batch_size: int, steps: int, warmup: int) -> dict:
    """The host's time to queue one step with nothing ahead of it (median of 5), and a window
    training on one batch over and over: its layout's speed without DALI running beside it."""
    launches = []
    for _ in range(5):
        sync()
        t0 = time.perf_counter()
        train(*batch)
        launches.append(time.perf_counter() - t0)
    sync()
    return {"launch_unqueued_ms": 1e3 * sorted(launches)[2],
            "one_batch_images_per_sec": batch_size * steps / window(lambda: train(*batch), steps, warmup)}


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
    # Whole-GPU syncs of other threads than training's (which syncs at the window's edges):
    # nvJPEG's hardware decoder makes one per batch from a DALI thread.
    launches = collections.Counter(e.get("tid") for e in events if e.get("name") == "cudaLaunchKernel")
    training = launches.most_common(1)[0][0] if launches else None
    syncs = [e["dur"] for e in events if e.get("name") == "cudaDeviceSynchronize" and e.get("tid") != training]
    report["other_threads_device_syncs"] = {"count": len(syncs), "ms": sum(syncs) / 1e3}
    report["training_gaps"] = gaps(max(by_stream.values(), key=lambda evs: sum(e["dur"] for e in evs)), lo)
    return report


def gaps(evs: list, lo: float) -> dict:
    """Where the training stream sits idle between its own kernels: the total, and the longest gaps
    with the kernels on either side (ms from the trace's start)."""
    evs = sorted(evs, key=lambda e: e["ts"])
    idle, last = [], evs[0]  # last: the work that ends latest so far (kernels of a stream may overlap)
    for e in evs[1:]:
        if e["ts"] > last["ts"] + last["dur"]:
            idle.append((e["ts"] - (last["ts"] + last["dur"]), last, e))
        if e["ts"] + e["dur"] > last["ts"] + last["dur"]:
            last = e
    longest = sorted(idle, key=lambda g: -g[0])[:8]
    return {"idle_ms": sum(g[0] for g in idle) / 1e3, "gaps_over_0.1ms": sum(g[0] > 100 for g in idle),
            "longest": [[round((b["ts"] - lo) / 1e3, 2), round(us / 1e3, 3), a["name"][:50], b["name"][:50]]
                        for us, a, b in sorted(longest, key=lambda g: g[2]["ts"])]}


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
    p.add_argument("--trace-activities", default="cpu,cuda", choices=["cpu,cuda", "cuda"],
                   help="what the traces record: host and device, or device work only")
    p.add_argument("--diagnose", action="store_true",
                   help="add the host's wait/launch split and a window on one reused DALI batch")
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

    def traced(name: str, step) -> dict:
        """The per-stream report of --trace-steps steps, profiled; {} without --trace."""
        if not args.trace:
            return {}
        wanted = {"cpu": torch.profiler.ProfilerActivity.CPU, "cuda": torch.profiler.ProfilerActivity.CUDA}
        activities = [wanted[a] for a in args.trace_activities.split(",") if a == "cpu" or device.type == "cuda"]
        if not activities:  # device work only, on a machine without one
            return {}
        with torch.profiler.profile(activities=activities) as prof:
            window(step, args.trace_steps, 0)
        path = f"{args.trace}/trace_{name}.json.gz".replace("=", "_").replace(",", "_")
        prof.export_chrome_trace(path)
        return {"streams": stream_report(path)}

    synthetic = lambda: train(images, labels)  # noqa: E731
    report("synthetic", window(synthetic, args.steps, args.warmup_steps), **traced("synthetic", synthetic))
    for setting in args.settings:
        ns = argparse.Namespace(data_root=args.data_root, batch_size=args.batch_size, image_size=args.image_size,
                                precision=args.precision, loss_scale=1024.0, channels_last=True,
                                dali=[s for s in setting.split(",") if s])
        try:
            cfg, pipeline = dali_config(ns, device)
            batches = dali_batches(cfg, pipeline, device, 0, 1)
            with HostSplit(train, batches) as step:  # two clock reads a step: timed without --diagnose too
                seconds = window(step, args.steps, args.warmup_steps)
            extra = step.report(args.steps) if args.diagnose else {}
            extra.update(traced(setting or "defaults", lambda: labelled_step(train, batches)))
            if args.diagnose:
                extra.update(one_batch(train, next(batches), args.batch_size, args.steps, args.warmup_steps))
            with HostSplit(None, batches) as alone:
                decode = window(alone, 40, 5)
            if args.diagnose:
                extra.update(alone.report(40, prefix="alone"))
            report(setting or "defaults", seconds, decode_only_images_per_sec=args.batch_size * 40 / decode, **extra)
        except Exception as exc:  # one failing setting leaves the others to run
            print(json.dumps({"setting": setting, "error": str(exc).splitlines()[0][:300]}), flush=True)
        batches = None
        gc.collect()
    report("synthetic_again", window(lambda: train(images, labels), args.steps, args.warmup_steps))


if __name__ == "__main__":
    main()
