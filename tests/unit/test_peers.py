"""The pieces of a run across hosts that need no second host: which rank a failed collective lost,
dist.interface, how a SLURM job's end is told, and the Multi-node page's commands."""

import ast
from pathlib import Path

import pytest

from helpers import ROOT
from rn50.distributed import peers
from rn50.launcher.slurm_jobs import why_ended


def test_a_peers_address_in_gloo_error_names_its_rank_and_node(monkeypatch):
    monkeypatch.setattr(peers, "_roster", [
        peers.Peer(0, 0, "node1", frozenset({"198.18.29.11"})), peers.Peer(1, 1, "node2", frozenset({"198.18.29.12"})),
        peers.Peer(2, 1, "node2", frozenset({"198.18.29.12"}))])
    closed = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed by peer "
              "[198.18.29.12]:56502. This is typically caused by a remote worker crashing. Check the logs. GLHF!")
    assert peers.lost(closed) == "lost one of ranks 1, 2 on node2 (node 1): Connection closed by peer [198.18.29.12]:56502"
    reset = "[../gloo/transport/tcp/pair.cc:534] Read error [198.18.29.11]:55463: Connection reset by peer"
    monkeypatch.setattr(peers, "_roster", peers._roster[:2])
    assert peers.lost(reset.replace("29.11", "29.12")) == (
        "lost rank 1 on node2 (node 1): Read error [198.18.29.12]:55463: Connection reset by peer")
    assert peers.lost(reset) is None  # this process's own address (rank 0 is not initialized: it is rank 0)
    assert peers.lost("CUDA out of memory") is None
    assert peers.lost("Read error [203.0.113.9]:1: Connection reset by peer") is None  # no rank of this run


def test_dist_interface_names_gloos_and_nccls_interface(compose_cfg, monkeypatch):
    for name in peers.INTERFACE_ENVS:
        monkeypatch.setenv(name, "before")
    peers.use_interface(compose_cfg([]))
    assert all(peers.os.environ[name] == "before" for name in peers.INTERFACE_ENVS)  # null: the user's stay
    peers.use_interface(compose_cfg(["dist.interface=ib0"]))
    assert all(peers.os.environ[name] == "ib0" for name in peers.INTERFACE_ENVS)
    assert peers._interface_address("lo") == "127.0.0.1"


def test_a_job_that_ended_without_its_rank_0_says_which_rank_srun_lost():
    log = ("rn50: measuring 0/300 steps\nsrun: error: node2: task 1: Killed\n"
           "srun: launch/slurm: _step_signal: Terminating StepId=2.0\nsrun: error: node1: task 0: Killed\n"
           "srun: Force Terminated StepId=2.0\n")
    assert why_ended(log, "no result") == "rank 1 on node2: Killed"
    exited = "Traceback ...\nMemoryError: out of memory\nsrun: error: node1: task 0: Exited with exit code 1\n"
    assert why_ended(exited, "x") == "srun: error: node1: task 0: Exited with exit code 1"
    assert why_ended("one\nlast words\n", "x") == "last words"
    assert why_ended("", "its log is empty") == "its log is empty"


def test_the_multi_node_page_shows_the_commands_the_tests_run():
    tests = Path(__file__).parent.parent / "e2e" / "test_multi_node.py"
    # Read, not imported: tests/e2e is on no path of a unit run, and importing it would load MLflow.
    constants = {target.id: ast.literal_eval(node.value) for node in ast.parse(tests.read_text()).body
                 if isinstance(node, ast.Assign) for target in node.targets if isinstance(target, ast.Name)
                 and target.id in ("SLURM_RUN", "SLURM_SWEEP", "TORCHRUN_DRY_RUN", "MLFLOW_SERVER", "REQUEUE")}
    page = " ".join((ROOT / "docs" / "multi-node.md").read_text().split())  # a command may wrap
    assert len(constants) == 5
    for command in constants.values():
        assert command in page, command
    assert "docs/multi-node.md" in (ROOT / "README.md").read_text()
    assert "tests/e2e/test_multi_node.py" in page  # where they run


def test_ddp_is_built_on_the_stream_the_rank_trains_on(monkeypatch):
    # Lightning's own DDPStrategy builds DDP inside a CUDA stream it makes (docs/benchmarks.md, issue 42:
    # the DDP step ran 1.2% slower with it); rn50's builds it where plain PyTorch does. A GPU-only path, so
    # its logic is checked here with CUDA's stream calls replaced by ones that fail the test.
    import torch
    from pytorch_lightning.strategies import DDPStrategy

    def no_stream(*args, **kwargs):
        raise AssertionError("DDP was built inside a CUDA stream of its own")

    monkeypatch.setattr(torch.cuda, "Stream", no_stream)
    monkeypatch.setattr(torch.cuda, "stream", no_stream)
    built = []
    monkeypatch.setattr(peers, "DistributedDataParallel", lambda **kwargs: built.append(kwargs) or "ddp")
    strategy = peers.RosterDDP(gradient_as_bucket_view=True)
    monkeypatch.setattr(strategy, "determine_ddp_device_ids", lambda: [1])  # a GPU rank's
    module = torch.nn.Linear(2, 2)
    assert strategy._setup_model(module) == "ddp"
    assert built == [{"module": module, "device_ids": [1], "gradient_as_bucket_view": True}]
    lightnings = DDPStrategy(gradient_as_bucket_view=True)
    monkeypatch.setattr(lightnings, "determine_ddp_device_ids", lambda: [1])
    with pytest.raises(AssertionError, match="stream of its own"):
        lightnings._setup_model(module)
