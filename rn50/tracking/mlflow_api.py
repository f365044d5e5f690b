"""MLflow's names that rn50 uses, in one place: rn50/tracking/client.py imports this module on
first use, so that a launcher that needs no run never pays for MLflow's import."""

from mlflow.entities import Metric, Param, RunStatus, RunTag  # noqa: F401
from mlflow.exceptions import MlflowException  # noqa: F401
from mlflow.tracking import MlflowClient  # noqa: F401
from mlflow.utils.validation import MAX_TAG_VAL_LENGTH  # noqa: F401
