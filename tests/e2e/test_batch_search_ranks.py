"""data.batch_size=auto across ranks: two torchrun ranks join and take rank 0's batch."""

import re

import pytest



AGREE = """
import sys
from omegaconf import OmegaConf
from rn50.rank.batch_search import agree_on_batch, join_ranks
from rn50.config.schema import Rn50Config
from rn50.options.components import Options
import torch, torch.distributed as dist
cfg = OmegaConf.merge(OmegaConf.structured(Rn50Config), {"dist": {"gpus_per_node": 2, "accelerator": "cpu"}})
join_ranks(cfg, torch.device("cpu"), Options.of(cfg))
rank = dist.get_rank()
chosen = agree_on_batch(10 + rank)  # each rank found another batch; rank 0's wins
from lightning_fabric.utilities.distributed import _init_dist_connection
from pytorch_lightning.plugins.environments import TorchElasticEnvironment
_init_dist_connection(TorchElasticEnvironment(), "gloo")  # what Lightning's DDP does next: a no-op now
print(f"rank {rank} chose {chosen}", flush=True)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_ranks_join_and_take_rank_0s_batch(tmp_path):
    import os
    import subprocess
    import sys

    from helpers import ROOT

    script = tmp_path / "agree.py"
    script.write_text(AGREE)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(script)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The two ranks print at once, so their lines can run together on the shared stdout.
    assert sorted(re.findall(r"rank \d chose \d+", proc.stdout)) == ["rank 0 chose 10", "rank 1 chose 10"]
