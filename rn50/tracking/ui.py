"""The MLflow UI made for benchmarks (issue 16): the saved view of the benchmark columns, the address
and command that open it, and a run's Description."""

import json
import os
import shlex
import time
from pathlib import Path
from typing import Dict, Optional

from rn50.tracking.client import mlflow, open_client

# --- The MLflow UI made for benchmarks (issue 16) ---
# MLflow 3 opens an experiment in its GenAI layout unless the URL (or the browser's last
# choice, kept in its local storage) says workflowType=machine_learning; no experiment tag
# changes that. A saved view (an experiment tag the UI's "Views" menu lists, opened by
# viewStateShareKey) picks the runs table's columns and its order. Ordering by anything but
# the start time lists child runs flat, so a sweep's points show without expanding its parent;
# by end time, newest first, each sweep's parent comes right before its points.
UI_VIEW_ID = "rn50-benchmarks"


UI_VIEW_TAG = "mlflow.sharedViewState." + UI_VIEW_ID


UI_COLUMNS = [
    "metrics.`throughput/images_per_sec`",
    "metrics.`throughput/images_per_sec_per_device`",
    "metrics.`gpu/utilization_pct`",
    "metrics.`mfu_pct`",
    "metrics.`energy/images_per_joule`",
    "metrics.`step_time/median_ms`",
    # Several devices: the gradients' all-reduce timed alone, and (logged at a sweep's end) how much
    # of it a step showed against the sweep's 1-device point, and its slowest GPU's clock against that
    # point's (rn50/results/scaling.py).
    "metrics.`scaling/efficiency_pct`",
    "metrics.`comm/allreduce_ms`",
    "metrics.`comm/busbw_GBps`",
    "metrics.`comm/exposed_ms_per_step`",
    "metrics.`scaling/slowest_clock_pct`",
    "tags.`comm_transport`",
    "tags.`network_changed`",  # the all-reduce before the first step and after the windows differed (comm.py)
    "metrics.`time/startup_s`",
    "metrics.`data/wait_pct`",
    "metrics.`cpu/cores_per_device`",  # the CPUs each device's input pipeline and rank used
    "metrics.`host/busy_cores`",
    "params.`dist.accelerator`",  # cpu or gpu, beside the GPU's model: a CPU figure says so
    "tags.`gpu_model`",
    "tags.`torch_version`",
]


DESCRIPTION_TAG = "mlflow.note.content"  # the run page's Description, rendered as Markdown


MLFLOW_UI_PORT = 5000  # `mlflow ui`'s own default


def ui_view_state() -> Dict:
    """The saved view's state, as MLflow 3.15+ stores it (column ids are the table's own)."""
    return {
        "selectedColumns": UI_COLUMNS,
        "columnOrder": ["attributes.`Run Name`", "runDateAndNestInfo", *UI_COLUMNS, "duration"],
        # Wide enough for the names: throughput/images_per_sec and ..._per_device differ at the end.
        "columnWidths": {"attributes.`Run Name`": 270,
                         **{c: 270 if "throughput/" in c else 170 for c in UI_COLUMNS}},
        "orderByKey": "attributes.`end_time`",
        "orderByAsc": False,
    }


def ensure_ui_view(tracking_uri: str, experiment_id: str) -> None:
    """Give the experiment the "rn50 benchmarks" saved view that ui_url opens; a no-op when it has it."""
    client = open_client(tracking_uri)
    state = json.dumps(ui_view_state(), sort_keys=True)
    current = client.get_experiment(experiment_id).tags.get(UI_VIEW_TAG)
    try:
        if current and json.loads(current).get("state") == state:
            return
    except ValueError:  # not ours, or damaged: write it again
        pass
    now = int(time.time() * 1000)
    envelope = {"name": "rn50 benchmarks", "createdAt": now, "updatedAt": now, "state": state}
    client.set_experiment_tag(experiment_id, UI_VIEW_TAG, json.dumps(envelope))


def _is_server(tracking_uri: str) -> bool:
    return tracking_uri.startswith(("http://", "https://"))


def ui_url(tracking_uri: str, experiment_id: str, host: str = "127.0.0.1", port: int = MLFLOW_UI_PORT) -> str:
    """The address of the experiment's training runs, with the benchmark columns: on the
    tracking server itself, or on `mlflow ui` at host:port for a local store."""
    base = tracking_uri.rstrip("/") if _is_server(tracking_uri) else f"http://{host}:{port}"
    return (f"{base}/#/experiments/{experiment_id}/runs"
            f"?workflowType=machine_learning&viewStateShareKey={UI_VIEW_ID}")


def ui_command(tracking_uri: str, host: str = "127.0.0.1", port: int = MLFLOW_UI_PORT,
               cwd: Optional[str] = None) -> Optional[str]:
    """The `mlflow ui` command that serves this store (None for a server: it has its own UI).
    Plain `mlflow ui` opens ./mlflow.db; any other store is named."""
    if _is_server(tracking_uri):
        return None
    words = ["mlflow", "ui"]
    db = tracking_uri.removeprefix("sqlite:///")
    here = Path(cwd or os.getcwd()).resolve() / "mlflow.db"
    if db == tracking_uri or Path(cwd or os.getcwd(), db).resolve() != here:
        words += ["--backend-store-uri", tracking_uri]
    if host != "127.0.0.1":
        words += ["--host", host]
    if port != MLFLOW_UI_PORT:
        words += ["--port", str(port)]
    return shlex.join(words)


def ui_hint(tracking_uri: str, experiment_id: str, host: str = "127.0.0.1", port: int = MLFLOW_UI_PORT,
            output_dir: Optional[str] = None, cwd: Optional[str] = None) -> str:
    """One console line: where the results are, how to see them, and the link that opens them."""
    where = f"results in {tracking_uri}" + (f" and {output_dir}" if output_dir else "")
    command = ui_command(tracking_uri, host, port, cwd)
    see = f"run `{command}` and open" if command else "open"
    return f"{where}; {see} {ui_url(tracking_uri, experiment_id, host, port)}"


def set_description(tracking_uri: str, run_id: str, markdown: str) -> None:
    """The run's Description in the MLflow UI (Markdown), cut to MLflow's tag limit."""
    open_client(tracking_uri).set_tag(run_id, DESCRIPTION_TAG, markdown[:mlflow().MAX_TAG_VAL_LENGTH])


def experiment_of(tracking_uri: str, run_id: str) -> str:
    return open_client(tracking_uri).get_run(run_id).info.experiment_id
