"""MLflow stores for the tests: the empty sqlite store made once for this machine, copied where a
run or a server needs one, and the runs a launch directory's store holds."""
import fcntl
import functools
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path


@functools.lru_cache(maxsize=None)
def empty_store() -> Path:
    """An MLflow sqlite store with its schema made once for this machine and MLflow version, shared by
    pytest-xdist's workers and later sessions: making one costs seconds. Tests copy it (empty_store_in),
    never write it."""
    path = Path(tempfile.gettempdir()) / f"rn50-tests-empty-store-mlflow-{metadata.version('mlflow')}.db"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker makes it while the others wait
        if not path.exists():
            from mlflow.tracking import MlflowClient  # here, not at the top: MLflow takes seconds to import

            made = Path(tempfile.mkdtemp()) / "mlflow.db"
            MlflowClient(f"sqlite:///{made}").search_experiments()
            shutil.move(made, path.with_suffix(".tmp"))
            os.replace(path.with_suffix(".tmp"), path)  # whole or not at all, should a session be killed
    return path


def empty_store_in(folder, name: str = "mlflow.db") -> str:
    """A copy of the empty store as folder/name (a launch directory's default store with the default
    name); returns its sqlite URI."""
    shutil.copy(empty_store(), Path(folder) / name)
    return f"sqlite:///{Path(folder) / name}"


def runs_in(cwd, experiment="rn50"):
    """Every MLflow run of the experiment in cwd/mlflow.db: a launch directory's default store, or any
    folder holding one (a server's); none where there is no store."""
    db = Path(cwd) / "mlflow.db"
    if not db.exists():
        return []
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id]) if exp else []
