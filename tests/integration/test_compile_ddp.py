"""model.compile_ddp in rn50's own arrangement: the network compiled inside the LightningModule, whose
training step runs inside DDP's forward (as Lightning's DDP strategy wraps it). With ddp_optimizer
dynamo splits the compiled network at DDP's gradient buckets; with no_optimization it compiles one
graph (issue 42: at 2 GPUs experiment=fastest ran faster unsplit over NVLink)."""

import functools

import pytest
from torch import nn

from helpers import TINY
from rn50.launcher.launch import preflight
from rn50.recipe import model as model_module
from rn50.recipe.model import ResNetModule

pytestmark = pytest.mark.slow  # dynamo traces resnet18 twice: about 10 s on 2 cores


class StepInDDP(nn.Module):
    """What Lightning's DDP strategy runs: DDP's forward calls the module's training_step."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, batch):
        return self.module.training_step(batch, 0)


@pytest.mark.parametrize("mode,split", [("ddp_optimizer", True), ("no_optimization", False)])
def test_compile_ddp_decides_whether_dynamo_splits_the_network_at_ddps_buckets(
        compose_cfg, monkeypatch, one_rank_group, mode, split):
    import torch._dynamo
    import torch._dynamo.config as dynamo
    import torch._inductor.config as inductor

    # the process's settings, which ResNetModule sets, put back after
    for config, name in ((dynamo, "optimize_ddp"), (inductor, "max_autotune_pointwise"),
                         (inductor, "coordinate_descent_tuning")):
        monkeypatch.setattr(config, name, getattr(config, name))
    graphs = []

    def counting_backend(gm, example_inputs):  # dynamo's graphs, run as traced: no inductor on a CPU test
        graphs.append(gm)
        return gm.forward

    # rn50's torch.compile call, with its mode, but a backend that counts what dynamo hands it
    monkeypatch.setattr(model_module.torch, "compile", functools.partial(torch.compile, backend=counting_backend))
    cfg = preflight(compose_cfg([*TINY, "model.compile=true", f"model.compile_ddp={mode}"])).cfg
    module = ResNetModule(cfg.model, cfg.optim, False)
    assert dynamo.optimize_ddp == mode
    # resnet18's 45 MB of fp32 gradients fill two of DDP's 25 MB buckets
    ddp = torch.nn.parallel.DistributedDataParallel(StepInDDP(module))
    torch._dynamo.reset()
    try:
        batch = (torch.randn(2, 3, 32, 32).contiguous(memory_format=torch.channels_last), torch.tensor([0, 1]))
        ddp(batch).backward()
    finally:
        torch._dynamo.reset()
    assert (len(graphs) > 1) == split, f"{mode}: {len(graphs)} graphs"


def test_the_bare_loop_refuses_the_setting_uncompiled(capsys):
    from rn50.tools import baseline

    with pytest.raises(SystemExit):
        baseline.main(["--compile-ddp", "no_optimization"])
    assert ("rn50.baseline: error: --compile-ddp no_optimization sets how torch.compile splits the graph for DDP: "
            "add --compile") in capsys.readouterr().err


def test_the_bare_loop_refuses_a_whole_step_graph_under_ddp(capsys, monkeypatch):
    from rn50.tools import baseline

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit) as exited:
        baseline.main(["--cuda-graph"])
    assert exited.value.code == 2
    assert ("rn50.baseline: error: --cuda-graph captures one process's whole step; under torchrun (WORLD_SIZE=2) "
            "DDP's capture is not supported here") in capsys.readouterr().err
