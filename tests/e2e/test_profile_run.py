"""A profiler=pytorch run through python -m rn50 keeps its trace, its kernel table and its busy share."""

import csv
import gzip
import json
from pathlib import Path

import pytest

from helpers import TINY
from helpers.cli import rn50
from helpers.store import runs_in
from rn50.profiling.torch_profile import (KINDS)
from rn50.tracking.client import MlflowClient


@pytest.mark.slow
def test_a_pytorch_profiled_run_keeps_trace_table_and_busy_share(tmp_path):
    proc = rn50(tmp_path, *TINY, "profiler=pytorch", "profiler.wait=0", "profiler.warmup=1", "profiler.active=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FINISHED" and run.data.tags["profiled"] == "pytorch"
    m = run.data.metrics
    assert 0 < m["profile/device_busy_pct"] <= 100
    assert m["profile/conv_gemm_pct"] > 0 and m["profile/batchnorm_pct"] > 0
    assert sum(m[f"profile/{k}_pct"] for k in KINDS) == pytest.approx(100)
    artifacts = {a.path for a in MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").list_artifacts(run.info.run_id)}
    assert {"trace.json.gz", "kernels.csv"} <= artifacts
    out = Path(run.data.tags["output_dir"])
    trace = json.load(gzip.open(out / "trace.json.gz"))
    assert sum(e.get("name", "").startswith("ProfilerStep#") for e in trace["traceEvents"]) == 2
    rows = list(csv.DictReader(open(out / "kernels.csv")))
    assert any(r["name"] == "aten::conv2d" for r in rows)
    # the measured window came first and is unchanged: 2 steps
    assert len(list(csv.DictReader(open(out / "step_times.csv")))) == 2
