"""MLflow: the only package that imports mlflow. The store's runs, params and health (store),
and a run's results kept to a file and logged (upload, python -m rn50.upload)."""
