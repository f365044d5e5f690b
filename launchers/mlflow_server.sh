#!/usr/bin/env bash
# Start an MLflow tracking server that many rn50 processes or nodes can log to at once
# (a shared sqlite file races on first schema creation; a server does not).
#
#   launchers/mlflow_server.sh [--host ADDR] [--port PORT] [--backend URI] [--artifacts DIR] [--workers N]
#                              [--allowed-hosts LIST]
#
#   --host       address to bind (default 127.0.0.1; use the node's cluster address for other nodes)
#   --port       port (default 5000)
#   --backend    sqlite:////shared/mlflow/mlflow.db (default: ./mlflow.db) or postgresql://user:pass@db/mlflow
#   --artifacts  directory on storage every node can reach (default: ./mlartifacts)
#   --workers    server processes (default 4)
#   --allowed-hosts  the Host headers the server answers, comma-separated, * for any (default: MLflow's
#                localhost and private addresses, plus --host, this machine's hostnames and addresses,
#                each with any port). MLflow refuses every other name with 403 "Invalid Host header",
#                so nodes reaching http://login01:5000 need login01 here.
#
# Then point runs at it:  python -m rn50 mlflow.tracking_uri=http://ADDR:PORT
set -euo pipefail
host=127.0.0.1 port=5000 workers=4 backend="sqlite:///$(pwd)/mlflow.db" artifacts="$(pwd)/mlartifacts" allowed=
while [ $# -gt 0 ]; do
  case "$1" in
    --host) host=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --backend) backend=$2; shift 2 ;;
    --artifacts) artifacts=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --allowed-hosts) allowed=$2; shift 2 ;;
    *) echo "mlflow_server.sh: error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [ -z "$allowed" ]; then
  # MLflow's defaults (--allowed-hosts replaces them), and the names other hosts use for this one.
  names="localhost 127.0.0.1 0.0.0.0 $host $(hostname) $(hostname -f 2>/dev/null) $(hostname -I 2>/dev/null)"
  allowed="10.*,192.168.*,$(seq -s, -f '172.%g.*' 16 31),fc00:*,[::1],[[]::1]:*"  # [ opens a pattern's set
  for name in $names; do allowed="$allowed,$name,$name:*"; done
fi
mkdir -p "$artifacts"
# MLflow 3's server also starts a job runner for its GenAI features (evaluations, prompt optimization,
# trace rollups): about eight huey consumer processes, each importing MLflow, that training runs never
# use. Off unless the caller sets the variable.
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION="${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false}"
# --serve-artifacts: clients upload through the server, so nodes need no access to the artifact path.
exec mlflow server --host "$host" --port "$port" --backend-store-uri "$backend" \
  --artifacts-destination "$artifacts" --serve-artifacts --workers "$workers" --allowed-hosts "$allowed"
