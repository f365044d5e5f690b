"""Did the run train? The proof every throughput figure carries, from the loss of each step and
the steps its loss scaler skipped; no torch here.

A figure counts only if its run trained: an amp run whose optimizer never took a step measures
kernels, not training (rn50 issue 27). The ranks keep each step's loss and found_inf on the device
and read them once, after the measured windows, so nothing here perturbs them. The loss "at the
window's edges" is the loss of the step each edge follows: the last warm-up step's at the start,
the last measured step's at the end, where the timing already synchronized.
"""

import math
from typing import Dict, List, Optional, Sequence

DIVERGED = "diverged"
"""The failure kind of a run whose loss stopped being finite (MLflow tag `failure`)."""


def first_nonfinite(losses: Sequence[float]) -> Optional[int]:
    """The 1-based step of the first loss that is NaN or infinite, or None."""
    return next((i + 1 for i, loss in enumerate(losses) if not math.isfinite(loss)), None)


def diverged_line(per_rank: Sequence[Sequence[float]]) -> Optional[str]:
    """'training diverged: loss nan at step 37' for the earliest step any rank's loss was not
    finite (rank named where there are several), or None when every loss was finite."""
    found = [(step, rank) for rank, losses in enumerate(per_rank) for step in [first_nonfinite(losses)] if step]
    if not found:
        return None
    step, rank = min(found)
    where = f" on rank {rank}" if len(per_rank) > 1 else ""
    return f"training diverged: loss {per_rank[rank][step - 1]} at step {step}{where}"


def proof_metrics(losses: Sequence[float], skipped: Optional[Sequence[float]], loss_scale: Optional[float],
                  warmup: int, measured: int) -> Dict[str, float]:
    """train/loss_first and train/loss_last (the loss at the measured windows' first and last
    edge), train/loss_fell (1 or 0), train/loss_initial (the first step's), train/skipped_steps (the warm-up's and the windows'
    overflowed steps), train/skipped_steps_window (those inside the windows), and
    train/loss_scale where a scaler ran. skipped: 1.0 per skipped step, in order; empty without
    a scaler (nothing is skipped), None from a scaler that does not say (no skipped figures)."""
    end = warmup + measured
    metrics = {"train/loss_first": losses[warmup - 1], "train/loss_last": losses[end - 1]}
    metrics["train/loss_fell"] = float(metrics["train/loss_last"] < metrics["train/loss_first"])
    metrics["train/loss_initial"] = losses[0]
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
    """What a user must hear about a run that did not diverge: its loss did not fall on a batch
    it should have learned (synthetic data trains on one batch), or steps were skipped inside
    its measured windows (those steps did no optimizer work, so the figure flatters it)."""
    said = []
    if fixed_batch and not metrics.get("train/loss_fell", 1.0):
        said.append(f"the loss did not fall across the measured window on the fixed synthetic batch "
                    f"({metrics['train/loss_first']:.4g} -> {metrics['train/loss_last']:.4g}; "
                    f"{metrics['train/loss_initial']:.4g} at step 1): check that this run trains")
    skipped = int(metrics.get("train/skipped_steps_window", 0))
    if skipped:
        said.append(f"{skipped} step(s) inside the measured windows were skipped by the loss scaler "
                    f"(gradients overflowed; loss scale now {metrics.get('train/loss_scale', float('nan')):g})")
    return said
