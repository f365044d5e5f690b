"""The table of benchmarks/scripts/ddp_gpu.sh: every case's images/sec, its proof that it trained, its
communication, and rn50 / bare where the same transport, GPU count and settings have both.

    python benchmarks/scripts/ddp_table.py OUTDIR
"""

import json
import sys
from pathlib import Path


def row(path: Path) -> dict:
    """One case's figures, from the bare loop's JSON line or rn50's summary.json."""
    d = json.loads(path.read_text() or "{}")
    transport, gpus, what, *rest = path.stem.split("-")
    common = dict(case=path.stem, key=(transport, gpus, "-".join(rest)), what=what)
    if "baseline" in d:
        return dict(common, ips=d["images_per_sec"], first=d.get("loss_first"), last=d.get("loss_last"),
                    skipped=d.get("skipped_steps_window"), comm=d.get("profile/comm_ms_per_step"),
                    exposed=d.get("profile/comm_exposed_ms_per_step"), allreduce=None, busbw=None,
                    lead=d.get("host/lead_median_ms"), bound=d.get("host/bound_steps_pct"), gc=None, transport=None)
    return dict(common, ips=d.get("throughput/images_per_sec"), first=d.get("train/loss_first"),
                last=d.get("train/loss_last"), skipped=d.get("train/skipped_steps_window"),
                comm=d.get("profile/comm_ms_per_step"), exposed=d.get("profile/comm_exposed_ms_per_step"),
                allreduce=d.get("comm/allreduce_ms"), busbw=d.get("comm/busbw_GBps"),
                lead=d.get("host/lead_median_ms"), bound=d.get("host/bound_steps_pct"), gc=d.get("host/gc_ms"),
                transport=d.get("transport"))


def fmt(value, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def main(out: str) -> None:
    rows = [row(p) for p in sorted(Path(out).glob("*.json")) if p.stat().st_size]
    bare = {r["key"]: r["ips"] for r in rows if r["what"] == "bare" and r["ips"]}
    print("| case | images/sec | rn50 / bare | loss first -> last | skipped in window | comm ms/step "
          "| exposed ms/step | all-reduce ms | busbw GB/s | host lead ms | host-bound steps % | gc ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        ratio = r["ips"] / bare[r["key"]] if r["what"] != "bare" and r["ips"] and r["key"] in bare else None
        print(f"| {r['case']} | {fmt(r['ips'])} | {fmt(ratio, '.4f')} | {fmt(r['first'], '.3g')} -> "
              f"{fmt(r['last'], '.3g')} | {fmt(r['skipped'], '.0f')} | {fmt(r['comm'], '.2f')} | "
              f"{fmt(r['exposed'], '.2f')} | {fmt(r['allreduce'], '.2f')} | {fmt(r['busbw'])} | "
              f"{fmt(r['lead'])} | {fmt(r['bound'])} | {fmt(r['gc'])} |")


if __name__ == "__main__":
    main(sys.argv[1])
