"""The MLflow client every part of rn50 uses, made under one retry policy, and a server's health probe.

MLflow is imported on first use (mlflow()): answers that need no run (--help, --cfg, dry runs, bad
input) come back without paying for it. rn50/tracking/mlflow_api.py holds MLflow's names.
"""

import os
import urllib.error
import urllib.request
from typing import Optional

# MLflow's HTTP client retries for minutes by default; an unreachable server should fail fast.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")


os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")


def mlflow():
    """MLflow's names that rn50 uses (rn50/tracking/mlflow_api.py), imported on first use."""
    from rn50.tracking import mlflow_api  # deferred: seconds that --help, --cfg, dry runs and bad input never pay

    return mlflow_api


def open_client(uri: str):
    """An MlflowClient of the store at uri. Every client rn50 makes is made here, under this
    module's one retry policy (MLFLOW_HTTP_REQUEST_MAX_RETRIES, above)."""
    return mlflow().MlflowClient(uri)


def server_unreachable(uri: str) -> Optional[str]:
    """A server's /health probe, the one rn50 makes: None when it answers, else why not. One try
    of 10 s, so that a server that is down is said at once."""
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=10).read()
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))
    return None


def __getattr__(name: str):
    """MlflowClient and MlflowException, imported when a caller first asks for them."""
    if name in ("MlflowClient", "MlflowException"):
        return getattr(mlflow(), name)
    raise AttributeError(name)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
