"""CPU use of a run's threads, by process and thread name, over a few seconds while it runs: whether
one DDP rank spends more CPU than another beside its GPU (OpenMP pools spinning, NCCL's proxy and socket
threads, samplers), which NCCL's socket transport competes with. Linux only (/proc).

    PYTHONPATH=. python benchmarks/scripts/thread_cpu.py --after 20 --for 5 [--match rn50] > OUT.txt

Prints one line per (process, thread name): % of one core over the interval, and the threads of that name;
then the host's busy cores over the interval. The interval is a fixed offset from the call: check that it fell
inside the run's measured windows (time/startup_s + time/warmup_s in its summary.json) before reading it as theirs.
"""

import argparse
import os
import time
from collections import defaultdict

from rn50.measure import host  # the host's busy CPU seconds as a run reads them; run with the repository on PYTHONPATH

TICK = os.sysconf("SC_CLK_TCK")


def threads(match: str) -> dict:
    """{(pid, tid): (process, thread name, cpu ticks)} for every process whose command line has match."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            if match not in cmd or "thread_cpu.py" in cmd:
                continue
            process = f"{pid} {' '.join(cmd.split()[:4])[:60]}"
            for tid in os.listdir(f"/proc/{pid}/task"):
                stat = open(f"/proc/{pid}/task/{tid}/stat").read()
                name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
                found[(pid, tid)] = (process, name, int(rest[11]) + int(rest[12]))  # utime + stime
        except (OSError, ValueError):
            continue
    return found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--after", type=float, default=20.0, help="seconds to wait before the interval")
    ap.add_argument("--for", dest="span", type=float, default=5.0, help="the interval, seconds")
    ap.add_argument("--match", default="rn50", help="text in the processes' command lines")
    args = ap.parse_args()
    time.sleep(args.after)
    before, busy0, t0 = threads(args.match), host.busy_s(), time.monotonic()
    time.sleep(args.span)
    after, busy1, wall = threads(args.match), host.busy_s(), time.monotonic() - t0
    use, count = defaultdict(float), defaultdict(int)
    for key, (process, name, ticks) in after.items():
        if key in before:
            use[(process, name)] += (ticks - before[key][2]) / TICK / wall * 100
            count[(process, name)] += 1
    for (process, name), pct in sorted(use.items(), key=lambda kv: -kv[1]):
        if pct >= 0.5:
            print(f"{pct:7.1f}%  x{count[(process, name)]:<3} {name:<20} {process}")
    print(f"host busy cores: {(busy1 - busy0) / wall:.1f} of {os.cpu_count()}")


if __name__ == "__main__":
    main()
