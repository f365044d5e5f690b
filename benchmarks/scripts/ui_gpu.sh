#!/usr/bin/env bash
# Issue-16 verification on one GPU: a small sweep with repeats, kept as an MLflow store
# for a screenshot of the UI's benchmark view, and two sweeps' worth of runs for rn50.compare.
# Usage: benchmarks/scripts/ui_gpu.sh OUTDIR   (run from the repository root); then, on a host with
# chromium: benchmarks/scripts/ui_screenshot.sh OUTDIR/mlflow.db docs/mlflow_ui.png
set -euo pipefail
out=$(realpath -m "${1:?output directory}") && mkdir -p "$out"
repo=$(pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
python3 -m rn50 --multirun data.batch_size=128,256 bench.repeats=3 2>&1 | tail -5
python3 -m rn50 --multirun data.batch_size=128,256 bench.repeats=3 2>&1 | tail -5
# The second sweep against the first: the same host, so "same" or "within noise" is expected.
first=$(python3 -c "from mlflow.tracking import MlflowClient as C; c=C('sqlite:///mlflow.db'); print(c.search_runs([c.get_experiment_by_name('rn50').experiment_id], \"tags.\`rn50.role\` = 'sweep'\", order_by=['attributes.start_time ASC'])[0].info.run_id)")
second=$(python3 -c "from mlflow.tracking import MlflowClient as C; c=C('sqlite:///mlflow.db'); print(c.search_runs([c.get_experiment_by_name('rn50').experiment_id], \"tags.\`rn50.role\` = 'sweep'\", order_by=['attributes.start_time DESC'])[0].info.run_id)")
python3 -m rn50.compare "$first" "$second" --out "$out/compare.png" | tee "$out/compare.md" || echo "compare exit $?" | tee -a "$out/compare.md"
cp mlflow.db "$out/mlflow.db"
cp multirun/*/*/sweep_report.md "$out/"
