"""MLflow: the only package that imports mlflow (rn50/tracking/mlflow_api.py, on first use), split by
job: the client under one retry policy (client), whether a store can be used (health), runs as rn50
records them and runs whose launcher died (runs), a sweep's runs (sweeps), the benchmark view of the
UI (ui), and a run's results kept to a file and then logged (upload, python -m rn50.upload).
A run's lifecycle and failure policy are the launcher's (rn50/launcher/lifecycle.py)."""

from rn50.tracking import client, health, runs, sweeps, ui  # noqa: F401  `from rn50 import tracking` reaches them
