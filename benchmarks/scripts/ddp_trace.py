"""Where a DDP step's time goes on one rank, from a torch.profiler Chrome trace: for each profiled step,
its device time split into compute alone, NCCL alone, both at once and idle, the NCCL kernels' count, and
when the first NCCL kernel (DDP's buffer broadcast, at the forward's start) started and the last ended,
relative to the step's start. Two traces side by side
(rn50's rank 0 and the bare loop's) answer where one step is longer than the other. main_ms sums the work
on the stream the optimizer ran on (the training's), side_ms the work on any other stream but NCCL's: a
data pipeline's (DALI's decoding, copies and resizing beside the step); the largest kinds of side work
follow, as a mean per step.

    python benchmarks/scripts/ddp_trace.py TRACE.json[.gz] [TRACE2 ...]

A step runs from the end of the previous step's optimizer kernels to the end of its own (the fused
SGD, and amp's scale update): the traces' host-side step ranges do not say where a step's device work is.
So it reads runs with fused SGD or amp (rn50's defaults and the bare loop's); a "step" of fewer than
MIN_KERNELS kernels (a kernel of another stream between the optimizer's) is not one and is left out.
"""

import collections
import gzip
import json
import re
import statistics
import sys
from pathlib import Path

NCCL = re.compile(r"nccl", re.I)
STEP_END = re.compile(r"fused_?sgd|amp_update_scale", re.I)
MIN_KERNELS = 50  # a ResNet's step runs hundreds


def kernels(path: str) -> list:
    raw = Path(path).read_bytes()
    trace = json.loads(gzip.decompress(raw) if path.endswith(".gz") else raw)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return sorted(((e["ts"], e["ts"] + e["dur"], e["name"], e.get("args", {}).get("stream"))
                   for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e))


def union(spans) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        start = max(start, reach)
        if end > start:
            total += end - start
            reach = end
    return total


def optimizer_stream(work: list):
    """The stream most optimizer kernels ran on: the training's."""
    ran = collections.Counter(k[3] for k in work if STEP_END.search(k[2]))
    if not ran:
        raise SystemExit("no fused SGD or amp scale-update kernel in the trace: cannot find its steps")
    return ran.most_common(1)[0][0]


def steps(work: list, train) -> list:
    """The kernels of each complete step: a step ends with the last of its run of optimizer kernels
    (the fused SGD, and amp's scale update after it) on the training's stream; work on other streams
    between them does not break the run."""
    on_train = [i for i, k in enumerate(work) if k[3] == train]
    ends = [i for i, j in zip(on_train, on_train[1:] + [None]) if STEP_END.search(work[i][2])
            and (j is None or not STEP_END.search(work[j][2]))]
    # before the first end: a partial step; each step starts where the previous one's device work ended
    steps = [(work[a][1], work[a + 1:b + 1]) for a, b in zip(ends, ends[1:])]
    return [(lo, step) for lo, step in steps if len(step) >= MIN_KERNELS]


def side(step: list, train) -> list:
    """(ms, name) of each kernel or copy that is neither NCCL's nor on the training's stream."""
    return [((b - a) / 1e3, name) for a, b, name, stream in step if stream != train and not NCCL.search(name)]


def kind(name: str) -> str:
    """A kernel's name without its template arguments and parameters; a copy's as the trace names it."""
    name = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    return re.split(r"[<(]", name, maxsplit=1)[0].strip()


def describe(lo: float, step: list, train) -> dict:
    hi = max(k[1] for k in step)
    comm = [(a, b) for a, b, name, _ in step if NCCL.search(name)]
    compute = [(a, b) for a, b, name, _ in step if not NCCL.search(name)]
    both, c, n = union(comm + compute), union(compute), union(comm)
    return dict(step_ms=(hi - lo) / 1e3, idle_ms=(hi - lo - both) / 1e3, compute_only_ms=(both - n) / 1e3,
                nccl_only_ms=(both - c) / 1e3, overlap_ms=(c + n - both) / 1e3,
                compute_sum_ms=sum(b - a for a, b in compute) / 1e3, nccl_kernels=len(comm),
                first_nccl_at_ms=(min(a for a, _ in comm) - lo) / 1e3 if comm else None,
                last_nccl_end_ms=(max(b for _, b in comm) - lo) / 1e3 if comm else None,
                main_ms=sum(b - a for a, b, name, stream in step if stream == train and not NCCL.search(name)) / 1e3,
                side_ms=sum(ms for ms, _ in side(step, train)))


def main(paths) -> None:
    keys = None
    for path in paths:
        work = kernels(path)
        train = optimizer_stream(work)
        found = steps(work, train)
        rows = [describe(lo, s, train) for lo, s in found]
        if not rows:
            print(f"{path}: no complete step found")
            continue
        keys = keys or list(rows[0])
        med = {k: statistics.median(r[k] for r in rows if r[k] is not None) for k in keys
               if any(r[k] is not None for r in rows)}
        print(f"{path}: {len(rows)} steps, medians: " + ", ".join(f"{k} {v:.2f}" for k, v in med.items()))
        kinds = collections.Counter()
        for _, step in found:
            for ms, name in side(step, train):
                kinds[kind(name)] += ms / len(found)
        if kinds:
            print("  beside the step, mean ms a step: " + ", ".join(f"{n} {ms:.2f}" for n, ms in kinds.most_common(6)))


if __name__ == "__main__":
    main(sys.argv[1:])
