"""The table of benchmarks/scripts/ddp_gpu.sh: every case's images/sec, its proof that it trained, its
communication (each run's all-reduce of its gradients timed alone before its warm-up and after its windows,
rn50's or the bare loop's: where they differ, the network moved), rn50 / bare where the same transport,
GPU count and settings have both (for rn50 as torchrun "nodes", NxM, the bare loop as the same nodes, bareNxM,
where the call ran it), a case's scaling against the 1-GPU case of its kind (rn50's or the bare loop's) with the
same transport and settings (images/sec / (GPUs x the 1-GPU figure)), and an rn50 run's seconds from its start
to its first measured step (time/startup_s + time/warmup_s: issue 42's 60 s for a second compiled run), and an rn50
run's slowest GPU's mean SM clock over the windows (gpu/sm_clock_mhz_min; the bare loop reads no clock): a GPU
at its power limit clocks lower, DDP waits for the slowest rank, and a 1-GPU reference on another card may have
clocked higher.
Several OUTDIRs make one table, as when a case's reference ran in another call on the same machine.

    python benchmarks/scripts/ddp_table.py OUTDIR [OUTDIR...]
"""

import json
import re
import sys
from pathlib import Path


def row(path: Path) -> dict:
    """One case's figures, from the bare loop's JSON line or rn50's summary.json."""
    d = json.loads(path.read_text() or "{}")
    transport, gpus, what, *rest = path.stem.split("-")
    # the keys the bare loop's JSON line and rn50's summary.json share
    common = dict(case=path.stem, key=(transport, gpus, "-".join(rest)), what=what, gpus=int(gpus), start=None,
                  comm=d.get("profile/comm_ms_per_step"), exposed=d.get("profile/comm_exposed_ms_per_step"),
                  allreduce=d.get("comm/allreduce_ms"), before=d.get("comm/allreduce_before_ms"),
                  busbw=d.get("comm/busbw_GBps"), lead=d.get("host/lead_median_ms"),
                  bound=d.get("host/bound_steps_pct"), transport=d.get("transport"),
                  clock=d.get("gpu/sm_clock_mhz_min"))
    if "baseline" in d:
        return dict(common, ips=d["images_per_sec"], first=d.get("loss_first"), last=d.get("loss_last"),
                    skipped=d.get("skipped_steps_window"), gc=None)
    return dict(common, ips=d.get("throughput/images_per_sec"), first=d.get("train/loss_first"),
                last=d.get("train/loss_last"), skipped=d.get("train/skipped_steps_window"), gc=d.get("host/gc_ms"),
                start=first_measured_s(d))


def first_measured_s(summary: dict):
    """Seconds from the run's start to its first measured step, where it recorded both parts."""
    parts = summary.get("time/startup_s"), summary.get("time/warmup_s")
    return None if None in parts else sum(parts)


def fmt(value, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


# Words of a case's name that are no setting of its 1-GPU reference: RUN=N, which only renames another run,
# CUDA_VISIBLE_DEVICES, which only picks the GPU a 1-GPU case ran on, and rn50's model.compile_ddp or the bare
# loop's compile_ddp, which change nothing on one GPU (no DDP).
NOT_SETTINGS = (r"run_\d+", r"cuda_visible_devices(?:_\d+)+", r"(?:model_)?compile_ddp_[a-z]+_[a-z]+")


def settings(key: tuple) -> tuple:
    """A case's transport and settings, for its 1-GPU reference (NOT_SETTINGS left out)."""
    words = key[2]
    for word in NOT_SETTINGS:  # one at a time: two side by side share the "_" between them
        words = re.sub(rf"^{word}(_|$)|_{word}(?=_|$)", "", words)
    return key[0], words


def kind(r: dict) -> str:
    """"bare" for the bare loop's cases (one node or NxM), "rn50" for rn50's."""
    return "bare" if r["what"].startswith("bare") else "rn50"


def scaling(r: dict, one_gpu: dict):
    """A case's images/sec against GPUs x the 1-GPU case of its kind's (same transport and settings): rn50's
    against rn50's, the bare loop's against the bare loop's."""
    base = one_gpu.get((kind(r), settings(r["key"])))
    return r["ips"] / (r["gpus"] * base) if r["gpus"] > 1 and r["ips"] and base else None


def shape(what: str):
    """The torchrun "nodes" a case ran as, "2x2" for 2x2 and bare2x2; None for one node. An NxM rn50 case is
    set against the bare loop of its own shape where the call ran one, else against the bare loop on one node,
    and its ratio then says "(bare on 1 node)"."""
    found = re.fullmatch(r"(?:bare)?(\d+x\d+)", what)
    return found.group(1) if found else None


def main(outs: list) -> None:
    """With several OUTDIRs each case is named OUTDIR/CASE, and where a reference (a bare case, a 1-GPU
    case) is in more than one, the last OUTDIR's is used."""
    paths = [p for out in outs for p in sorted(Path(out).glob("*.json")) if p.stat().st_size]
    rows = [row(p) for p in paths]
    if len(outs) > 1:
        for r, p in zip(rows, paths):
            r["case"] = f"{p.parent.name}/{r['case']}"
    bare = {(r["key"], shape(r["what"])): r["ips"] for r in rows if r["what"].startswith("bare") and r["ips"]}
    one_gpu = {(kind(r), settings(r["key"])): r["ips"] for r in rows if r["gpus"] == 1 and r["ips"]}
    print("| case | images/sec | rn50 / bare | x GPUs x 1 GPU | loss first -> last | skipped in window | comm ms/step "
          "| exposed ms/step | all-reduce ms (before the warm-up -> after the windows) | busbw GB/s | host lead ms "
          "| host-bound steps % | gc ms | start to first measured s | slowest GPU's SM clock MHz |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        ref = own = None
        if not r["what"].startswith("bare"):
            own = bare.get((r["key"], shape(r["what"])))
            ref = own or bare.get((r["key"], None))  # an NxM case without its bareNxM: the bare loop on one node
        ratio = fmt(r["ips"] / ref, ".4f") + ("" if own else " (bare on 1 node)") if r["ips"] and ref else "-"
        allreduce = fmt(r["allreduce"], ".2f")
        if r["before"]:
            allreduce = f"{r['before']:.2f} -> {allreduce}"
        print(f"| {r['case']} | {fmt(r['ips'])} | {ratio} | {fmt(scaling(r, one_gpu), '.4f')} | "
              f"{fmt(r['first'], '.3g')} -> {fmt(r['last'], '.3g')} | {fmt(r['skipped'], '.0f')} | "
              f"{fmt(r['comm'], '.2f')} | {fmt(r['exposed'], '.2f')} | {allreduce} | "
              f"{fmt(r['busbw'])} | {fmt(r['lead'])} | {fmt(r['bound'])} | {fmt(r['gc'])} | {fmt(r['start'])} | "
              f"{fmt(r['clock'], '.0f')} |")


if __name__ == "__main__":
    main(sys.argv[1:])
