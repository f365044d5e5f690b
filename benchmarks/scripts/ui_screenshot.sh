#!/usr/bin/env bash
# A screenshot of the documented MLflow UI link (README, "Seeing the results") for a store,
# through a real `mlflow ui` and headless Chromium.
# Usage: benchmarks/scripts/ui_screenshot.sh path/to/mlflow.db OUT.png   (run from the repository root)
set -euo pipefail
uri="sqlite:///$(realpath "${1:?mlflow.db}")"
png=$(realpath -m "${2:?output png}")
export PYTHONPATH=$(pwd)${PYTHONPATH:+:$PYTHONPATH}
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m mlflow ui --backend-store-uri "$uri" --port "$port" --workers 1 >/dev/null 2>&1 &
server=$!
trap 'kill $server' EXIT
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 1; done
url=$(python3 -c "import sys; from rn50 import tracking; c = tracking.client.MlflowClient(sys.argv[1])
print(tracking.ui.ui_url(sys.argv[1], c.get_experiment_by_name('rn50').experiment_id, port=int(sys.argv[2])))" "$uri" "$port")
profile=$(mktemp -d)
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" --window-size=2200,900 \
  --virtual-time-budget=30000 --screenshot="$png" "$url" 2>/dev/null
rm -rf "$profile"
echo "$url -> $png"
