"""Top-1 and top-5 over a whole validation set, each image counted exactly once across ranks.

Each rank evaluates a disjoint slice of the validation set (`shard`: no padding, unlike
torch's DistributedSampler, which repeats images so that every rank gets as many), counts its
correct predictions (`count_correct`), and one all-reduce of the counts (`reduce_counts`)
gives every rank the same totals; `fractions` turns them into top-k accuracies. Before that,
`average_running_stats` gives every rank the same batch-norm statistics: one model is evaluated
(and checkpointed: train=accuracy averages them at every epoch's end too).
"""

from typing import Dict, List, Sequence

import torch
from torch import nn

TOP_K = (1, 5)


def shard(size: int, rank: int, world: int) -> List[int]:
    """This rank's indices of a set of `size` items: every item in exactly one shard, the
    shards' sizes differing by at most one (a rank may get none)."""
    return list(range(rank, size, world))


def count_correct(logits: torch.Tensor, labels: torch.Tensor, ks: Sequence[int] = TOP_K) -> torch.Tensor:
    """[correct in the top k for each k..., images]: a float64 tensor on the logits' device.

    A k above the number of classes counts every image as correct (the label is always among them)."""
    top = logits.topk(min(max(ks), logits.shape[1]), dim=1).indices  # (N, K), best first
    hits = top == labels.view(-1, 1)
    counts = [hits[:, :k].any(dim=1).sum() for k in ks]
    return torch.stack([*counts, torch.tensor(labels.numel(), device=logits.device)]).to(torch.float64)


def _in_group() -> bool:
    """Whether this process is one rank of torch's default process group (else the reductions are no-ops)."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def reduce_counts(counts: torch.Tensor) -> torch.Tensor:
    """The counts summed over every rank (a no-op in a single process). float64 sums integers
    exactly up to 2^53 images, and gloo and NCCL both reduce it."""
    if _in_group():
        counts = counts.clone()
        torch.distributed.all_reduce(counts, op=torch.distributed.ReduceOp.SUM)
    return counts


def fractions(counts: torch.Tensor, ks: Sequence[int] = TOP_K) -> Dict[str, float]:
    """{'top1': ..., 'top5': ..., 'images': ...} from reduced counts."""
    values = counts.tolist()
    images = values[-1]
    result = {f"top{k}": (v / images if images else 0.0) for k, v in zip(ks, values)}
    result["images"] = images
    return result


def average_running_stats(net: nn.Module) -> None:
    """Each floating-point buffer of net (batch norm's running mean and variance) becomes its mean over
    every rank (a no-op in a single process): one all-reduce. Without DDP's buffer broadcast
    (dist.broadcast_buffers=false) each rank keeps the statistics of its own batches; with it they
    differ only by each rank's last step."""
    if not _in_group():
        return
    stats = [b for b in net.buffers() if b.is_floating_point()]
    if not stats:
        return
    total = torch.cat([b.reshape(-1) for b in stats])
    torch.distributed.all_reduce(total, op=torch.distributed.ReduceOp.SUM)
    total /= torch.distributed.get_world_size()
    for buffer, mean in zip(stats, total.split([b.numel() for b in stats])):
        buffer.copy_(mean.view_as(buffer))
