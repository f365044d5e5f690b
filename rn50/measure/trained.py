"""Did the run train? The proof every throughput figure carries, from the loss of each step and
the steps its loss scaler skipped; no torch here.

A figure counts only if its run trained: an amp run whose optimizer never took a step measures
kernels, not training (rn50 issue 27). The ranks keep each step's loss and found_inf on the device
and read them once, after the measured windows, so nothing here perturbs them. The loss "at the
window's edges" is the loss of the step each edge follows: the last warm-up step's at the start,
the last measured step's at the end, where the timing already synchronized.

Two ways a run that ran to its end still did not train, each failing it with one line:
- diverged: its loss is not finite at the end of the window (a lone overflowing step that the
  scaler skipped and the run got over is counted, not failed);
- stalled: the loss scaler skipped every step of the window, so no weight moved while it was timed.
"""

import math
from typing import Dict, List, Optional, Sequence

PROOF_TAG = "rn50.trained_proof"
"""A tag on every run recorded since rn50 proves that runs train (issue 27): their figures count."""


def diverged_line(per_rank: Sequence[Sequence[float]], end: int) -> Optional[str]:
    """'training diverged: loss nan at step 37' where any rank's loss at step `end` (1-based) is
    not finite, naming the step its last finite stretch ended (and the rank, where there are
    several); None where every rank's loss there is finite."""
    found = []
    for rank, losses in enumerate(per_rank):
        if math.isfinite(losses[end - 1]):
            continue
        step = end
        while step > 1 and not math.isfinite(losses[step - 2]):
            step -= 1
        found.append((step, rank))
    if not found:
        return None
    step, rank = min(found)
    where = f" on rank {rank}" if len(per_rank) > 1 else ""
    return f"training diverged: loss {per_rank[rank][step - 1]} at step {step}{where}"


def stalled_line(metrics: Dict[str, float], measured: int) -> Optional[str]:
    """'training stalled: ...' where the scaler skipped all `measured` steps of the windows."""
    if metrics.get("train/skipped_steps_window", 0) < measured:
        return None
    return (f"training stalled: the loss scaler skipped all {measured} measured steps (gradients overflowed at "
            f"loss scale {metrics.get('train/loss_scale', float('nan')):g}), so no weight moved while it was timed")


def proof_metrics(losses: Sequence[float], skipped: Optional[Sequence[float]], loss_scale: Optional[float],
                  warmup: int, measured: int) -> Dict[str, float]:
    """The proof: train/loss_first and train/loss_last (the loss at the measured windows' first
    and last edge), train/loss_fell (1 or 0), train/loss_initial (the first step's),
    train/nonfinite_steps (steps whose loss was NaN or infinite), train/skipped_steps (the
    warm-up's and the windows' overflowed steps), train/skipped_steps_window (those inside the
    windows), and train/loss_scale where a scaler ran. skipped: 1.0 per skipped step, in order;
    empty without a scaler (nothing is skipped), None where the scaler did not say."""
    end = warmup + measured
    metrics = {"train/loss_first": losses[warmup - 1], "train/loss_last": losses[end - 1]}
    metrics["train/loss_fell"] = float(metrics["train/loss_last"] < metrics["train/loss_first"])
    metrics["train/loss_initial"] = losses[0]
    metrics["train/nonfinite_steps"] = float(sum(not math.isfinite(loss) for loss in losses[:end]))
    if skipped is not None:
        flags = list(skipped[:end]) or [0.0] * end
        metrics["train/skipped_steps"] = float(sum(flags))
        metrics["train/skipped_steps_window"] = float(sum(flags[warmup:]))
    if loss_scale is not None:
        metrics["train/loss_scale"] = loss_scale
    return metrics


def note(metrics: Dict[str, float]) -> str:
    """The proof as the run's headline shows it: 'loss 6.93 -> 0.0123, 0 steps skipped in the window'."""
    if "train/loss_first" not in metrics:
        return ""
    text = f"loss {metrics['train/loss_first']:.4g} -> {metrics['train/loss_last']:.4g}"
    if "train/skipped_steps_window" not in metrics:
        return text
    skipped = int(metrics["train/skipped_steps_window"])
    return text + f", {skipped} step{'' if skipped == 1 else 's'} skipped in the window"


def warnings(metrics: Dict[str, float], fixed_batch: bool) -> List[str]:
    """What a user must hear about a run that trained: its loss did not fall across the window on
    a batch it should learn (synthetic data trains on one batch; at a high learning rate its loss
    first climbs, so the first step's loss is said too), or steps inside its windows were skipped
    (those steps did no optimizer work, so the figure flatters it)."""
    said = []
    first, last, initial = (metrics.get(f"train/loss_{k}") for k in ("first", "last", "initial"))
    if fixed_batch and not metrics.get("train/loss_fell", 1.0):
        since = (f"though it fell from {initial:.4g} at step 1" if last < initial
                 else f"nor below {initial:.4g}, its first step's: check that this run trains")
        said.append(f"the loss did not fall across the measured window on the fixed synthetic batch "
                    f"({first:.4g} -> {last:.4g}), {since}")
    skipped = int(metrics.get("train/skipped_steps_window", 0))
    if skipped:
        said.append(f"{skipped} step(s) inside the measured windows were skipped by the loss scaler "
                    f"(gradients overflowed; loss scale now {metrics.get('train/loss_scale', float('nan')):g})")
    nonfinite = int(metrics.get("train/nonfinite_steps", 0))
    if nonfinite:
        said.append(f"{nonfinite} step(s) had a loss that was not finite; the run recovered from them")
    return said
