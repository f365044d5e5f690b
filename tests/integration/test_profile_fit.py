"""NVTX ranges in a real fit of rn50's module on a composed, shrunk config."""

import pytorch_lightning as pl

from helpers import TINY
from rn50.options import pipelines
from rn50.options import precision
from rn50.launcher.launch import preflight
from rn50.recipe.model import ResNetModule
from rn50.profiling.nvtx import NvtxRanges


def test_nvtx_ranges_nest_and_balance_in_lightnings_hook_order(compose_cfg):
    cfg = preflight(compose_cfg(TINY)).cfg  # as the launcher hands it on
    calls = []
    ranges = NvtxRanges(push=calls.append, pop=lambda: calls.append("pop"))
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_steps=2, callbacks=[ranges], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         plugins=[precision.of(cfg).plugin("cpu")])
    trainer.fit(ResNetModule(cfg.model, cfg.optim, False), datamodule=pipelines.build(cfg))
    step = ["pop", "step", "forward", "pop", "backward", "pop", "optimizer", "pop", "pop", "data"]
    assert calls == ["data", *step, *step, "pop"]
