"""The launcher process (python -m rn50): it composes and checks a run, records it in MLflow and
starts its ranks (launch, pool); a sweep's parent run and report (sweep). It never imports torch
or Lightning."""
