"""rn50's log filter drops dependencies' known noise and keeps warnings about the user's setup;
RN50_VERBOSE=1 shows everything (a real fit in a fresh process: tests/e2e/test_console_fit.py)."""

import logging

import pytest

from rn50.console import NOISY_LOGGERS, DropLines, cpu_precision_warning, quiet


# Lines only GPU and multi-process runs print, as Lightning formats them.
GPU_NOISE = [
    "GPU available: True (cuda), used: True",
    "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1]",
    "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2",
    "-" * 100 + "\ndistributed_backend=nccl\nAll distributed processes registered. Starting with 2 processes\n" + "-" * 100,
    "You are using a CUDA device ('NVIDIA H100 80GB HBM3') that has Tensor Cores. To properly utilize them, ...",
    "Creating initial MLflow database tables...",
]
KEPT = [
    "GPU available but not used. You can set it by doing `Trainer(accelerator='gpu')`.",
    "no GPU on this host: dist.accelerator=auto falls back to the CPU",
    "The 'train_dataloader' does not have many workers which may be a bottleneck.",
]


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("pytorch_lightning.utilities.rank_zero", logging.INFO, __file__, 1, message, None, None)


@pytest.mark.parametrize("message", GPU_NOISE)
def test_gpu_and_distributed_banners_are_dropped(message):
    assert not DropLines().filter(record(message))


@pytest.mark.parametrize("message", KEPT)
def test_other_lines_pass(message):
    assert DropLines().filter(record(message))


def test_quiet_filters_the_emitting_loggers_once_and_verbose_leaves_them_alone(monkeypatch):
    loggers = [logging.getLogger(name) for name in NOISY_LOGGERS]
    before = [list(logger.filters) for logger in loggers]
    try:
        monkeypatch.setenv("RN50_VERBOSE", "1")
        quiet()
        assert [list(logger.filters) for logger in loggers] == before
        monkeypatch.setenv("RN50_VERBOSE", "0")
        quiet()
        quiet()
        added = [[f for f in logger.filters if f not in old] for logger, old in zip(loggers, before)]
        assert all(len(new) == 1 and isinstance(new[0], DropLines) for new in added)
    finally:
        for logger, old in zip(loggers, before):
            logger.filters[:] = old


@pytest.mark.parametrize("precision,device,warns", [
    ("amp", "cpu", True), ("amp_static", "cpu", True), ("fp32", "cpu", False),
    ("bf16", "cpu", False), ("amp", "cuda", False),
])
def test_cpu_precision_warning_only_for_fp16_on_a_cpu(caplog, compose_cfg, precision, device, warns):
    from rn50.options import precision as precisions

    with caplog.at_level(logging.WARNING, logger="rn50"):
        line = cpu_precision_warning(precisions.of(compose_cfg([f"precision={precision}"])), device)
    assert bool(line) == warns
    assert [r.getMessage() for r in caplog.records] == ([line] if warns else [])


def test_urllib3s_retries_to_a_server_that_went_away_are_not_shown(caplog):
    # A real request to a port nobody listens on, retried as MLflow's client retries: urllib3 logs a
    # WARNING per retry, which buried rn50's one line about the store.
    import socket

    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connections are refused
    session = requests.Session()
    session.mount("http://", HTTPAdapter(max_retries=Retry(total=2, backoff_factor=0)))
    quiet(show_all=False)
    with caplog.at_level(logging.WARNING), pytest.raises(requests.ConnectionError):
        session.get(f"http://127.0.0.1:{port}/api/2.0/mlflow/runs/log-batch", timeout=5)
    assert "Retrying" not in caplog.text
    logging.getLogger("urllib3.connectionpool").warning("Connection pool is full, discarding connection: x")
    assert "Connection pool is full" in caplog.text  # urllib3's other warnings still show
