"""What each point of several devices shows against the 1-device point of its settings: speedup,
scaling efficiency, the step time beyond the reference's, the share of the timed all-reduce hidden
behind compute, and how much slower its slowest device clocked. rn50/results/rows.py makes the rows."""

from typing import Dict, List, Optional, Tuple

from rn50.results.rows import DEVICE_NAMES, reference_medians, rounded

# Below this share of its reference's SM clock a point's slowest device is named in its scaling line:
# NVML's clock readings of one GPU under the same load differ by about 1%.
CLOCK_SHOWN_BELOW_PCT = 99.0


def add_scaling(rows: List[Dict]) -> List[Dict]:
    def key(r):  # a CPU run is no reference for a GPU run of the same config
        return r["setup"], r.get("accelerator")

    def is_reference(r):
        return r["gpus"] == 1

    base = reference_medians(rows, key, is_reference)
    base_clock = reference_medians(rows, key, is_reference, value="sm_clock_mhz")
    for r in rows:
        ref = base.get(key(r))
        ok = r["status"] == "FINISHED" and r["images_per_sec_median"] and ref
        r["speedup"] = r["images_per_sec_median"] / ref if ok else None
        r["scaling_efficiency_pct"] = 100.0 * r["speedup"] / r["gpus"] if ok else None
        r["comm_exposed_ms"] = r["comm_hidden_pct"] = None
        r["slowest_clock_pct"] = r["clock_ms"] = r["reference_clock_mhz"] = None
        if ok and r["gpus"] > 1 and r.get("batch_per_gpu"):
            ref_ms = 1e3 * r["batch_per_gpu"] / ref  # the reference's step, at the point's batch per device
            r["comm_exposed_ms"], r["comm_hidden_pct"] = exposed(r, ref_ms)
            ref_clock = base_clock.get(key(r))
            if ref_clock and r.get("sm_clock_mhz_min"):
                r["reference_clock_mhz"] = ref_clock
                r["slowest_clock_pct"], r["clock_ms"] = slower_clock(r, ref_ms, ref_clock)
        if r["status"] != "FINISHED":
            r["status"] = f"{r['status']} ({r['failure']})" if r["failure"] else r["status"]
    return rows


def exposed(row: Dict, ref_ms: float) -> Tuple[float, Optional[float]]:
    """(ms, %): what a step of several devices took beyond its 1-device reference's step (the
    communication no compute hid, and DDP's own work), never below 0 (noise); and the share of the
    timed all-reduce hidden behind compute, where the run timed one. ref_ms: the reference's step."""
    step_ms = 1e3 * row["batch_per_gpu"] * row["gpus"] / row["images_per_sec_median"]
    extra = max(0.0, step_ms - ref_ms)
    allreduce = row.get("allreduce_ms")
    hidden = 100.0 * min(1.0, max(0.0, 1 - extra / allreduce)) if allreduce else None
    return extra, hidden


def slower_clock(row: Dict, ref_ms: float, ref_clock_mhz: float) -> Tuple[float, float]:
    """(%, ms): the slowest device's mean SM clock over the windows as a share of the 1-device reference's,
    and what that alone adds to the reference's step, at most: its step stretched by the clocks' ratio
    (all of a step's time scaled with the clock; memory-bound kernels scale less). DDP waits each step for
    its slowest rank, and a GPU at its power limit clocks lower when its neighbours draw power too. The
    clock's reference is the median of the 1-device points that recorded one, the step's of all of them:
    the same points but where some were recorded before the clock was."""
    slowest = row["sm_clock_mhz_min"]
    return 100.0 * slowest / ref_clock_mhz, max(0.0, ref_ms * ref_clock_mhz / slowest - ref_ms)


def scaling_metrics(rows: List[Dict]) -> Dict[str, Dict[str, float]]:
    """What a sweep found of each point against its 1-device reference, as the point's metrics:
    scaling/speedup, scaling/efficiency_pct, comm/exposed_ms_per_step, comm/hidden_pct and
    scaling/slowest_clock_pct."""
    found = {}
    for r in rows:
        if r.get("speedup") is None or (r["gpus"] or 0) < 2:
            continue
        metrics = {"scaling/speedup": r["speedup"], "scaling/efficiency_pct": r["scaling_efficiency_pct"],
                   "comm/exposed_ms_per_step": r["comm_exposed_ms"]}
        if r.get("comm_hidden_pct") is not None:
            metrics["comm/hidden_pct"] = r["comm_hidden_pct"]
        if r.get("slowest_clock_pct") is not None:
            metrics["scaling/slowest_clock_pct"] = r["slowest_clock_pct"]
        found[r["run_id"]] = metrics
    return found


def scaling_lines(rows: List[Dict]) -> List[str]:
    """A sentence per finished point of several devices: '4 GPUs: 94.2% scaling; all-reduce 1.9 ms at
    210 GB/s over P2P/NVLink, 0.4 ms of it exposed per step (79% hidden)', and where its slowest device
    clocked lower than the 1-device point did, by how much and what that costs a step at most."""
    lines = []
    for r in rows:
        if (r["gpus"] or 0) < 2 or r.get("scaling_efficiency_pct") is None:
            continue
        one, many = DEVICE_NAMES[r.get("accelerator", "cuda")]
        text = (f"{r['model']} {r['precision']} bs{r['batch_per_gpu']}, {r['gpus']} {many}: "
                f"{r['scaling_efficiency_pct']:.1f}% scaling")
        clocked_lower = (r.get("slowest_clock_pct") or 100.0) < CLOCK_SHOWN_BELOW_PCT
        # what the slower clock may explain: its bound, but never more than the step grew
        clock_ms = min(r["clock_ms"], r["comm_exposed_ms"]) if clocked_lower else 0.0
        if r.get("allreduce_ms"):
            over = f" over {r['transport']}" if r.get("transport") else ""
            text += f"; all-reduce {rounded(r['allreduce_ms'])} ms at {rounded(r['busbw_GBps'])} GB/s{over}"
            if r.get("network_changed"):
                text += f" ({rounded(r['allreduce_before_ms'])} ms before the warm-up: the network changed under it)"
            text += ", "
            if r["comm_exposed_ms"] <= r["allreduce_ms"]:
                text += (f"{rounded(r['comm_exposed_ms'])} ms of it exposed per step "
                         f"({r['comm_hidden_pct']:.0f}% hidden)")
            elif clocked_lower and r["comm_exposed_ms"] - clock_ms <= r["allreduce_ms"]:
                text += (f"and a step takes {rounded(r['comm_exposed_ms'])} ms more than on 1 {one}: no more "
                         f"than the all-reduce alone if the slower clock costs all of its {rounded(clock_ms)} ms")
            else:  # the step grew by more than the all-reduce takes alone
                text += (f"and a step takes {rounded(r['comm_exposed_ms'])} ms more than on 1 {one}: more than the "
                         "all-reduce alone, so DDP's own work (bucket copies, kernels beside the collective) shows too")
        else:
            text += f"; {rounded(r['comm_exposed_ms'])} ms per step beyond 1 {one}'s (no all-reduce timed)"
        if clocked_lower:
            text += (f"; its slowest {one} ran at {r['sm_clock_mhz_min']:.0f} MHz against "
                     f"{r['reference_clock_mhz']:.0f} MHz on 1 {one} ({r['slowest_clock_pct']:.1f}%)")
            text += f", up to {rounded(clock_ms)} ms a step" if clock_ms > 0 else ""
        lines.append(text)
    return lines
