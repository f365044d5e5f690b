"""Read one thread of a py-spy speedscope file (`py-spy record --format speedscope --idle`).

python speedscope.py FILE "Process PID Thread TID" timeline [SECONDS_PER_ROW]
    each row: the two commonest innermost rn50 frames, with the frame below each
python speedscope.py FILE "Process PID Thread TID" imports T0 T1
    in [T0, T1) seconds: the modules being imported, by import depth, and the commonest leaf frames
"""

import collections
import json
import sys


def frame_name(frame: dict) -> str:
    where = (frame.get("file") or "").split("site-packages/")[-1].split("/tmp/repo/")[-1]
    return f"{frame['name']} ({where}:{frame.get('line', '')})"


def samples(path: str, thread: str):
    """(seconds since the thread's first sample, the sample's stack as frame dicts), in order."""
    with open(path) as f:
        data = json.load(f)
    frames = data["shared"]["frames"]
    profile = next(p for p in data["profiles"] if p["name"].startswith(thread))
    t = 0.0
    for stack, weight in zip(profile["samples"], profile["weights"]):
        yield t, weight, [frames[i] for i in stack]
        t += weight


def timeline(path: str, thread: str, step: float) -> None:
    rows = collections.defaultdict(collections.Counter)
    for t, weight, stack in samples(path, thread):
        ours = [i for i, f in enumerate(stack) if "rn50/" in (f.get("file") or "")]
        last = ours[-1] if ours else None
        below = frame_name(stack[last + 1]) if last is not None and last + 1 < len(stack) else ""
        rows[int(t // step)][f"{frame_name(stack[last]) if ours else '-'} | {below}"] += weight
    for row in sorted(rows):
        total = sum(rows[row].values())
        print(f"{row * step:6.1f}s " + " || ".join(f"{v / total:.0%} {k[:150]}" for k, v in rows[row].most_common(2)))


def imports(path: str, thread: str, t0: float, t1: float) -> None:
    modules, leaves = collections.Counter(), collections.Counter()
    for t, weight, stack in samples(path, thread):
        if not t0 <= t < t1:
            continue
        chain = [(f.get("file") or "").split("site-packages/")[-1] for f in stack if f["name"] == "<module>"]
        for depth, module in enumerate(chain):
            modules[(depth, module)] += weight
        leaves[frame_name(stack[-1])] += weight
    for depth in sorted({d for d, _ in modules}):
        shown = [(v, m) for (d, m), v in modules.most_common() if d == depth and v > 0.3][:4]
        if shown:
            print(f"-- depth {depth}\n" + "\n".join(f"  {v:5.1f} s {m}" for v, m in shown))
    print("-- leaves\n" + "\n".join(f"  {v:5.1f} s {k}" for k, v in leaves.most_common(12)))


if __name__ == "__main__":
    path, thread, what, *rest = sys.argv[1:]
    if what == "timeline":
        timeline(path, thread, float(rest[0]) if rest else 1.0)
    else:
        imports(path, thread, float(rest[0]), float(rest[1]))
