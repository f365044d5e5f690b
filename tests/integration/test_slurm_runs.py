"""The runs a SLURM sweep makes before it submits, in a local sqlite store: closed only if left running."""

from helpers.store import empty_store_in, runs_in


def test_runs_made_before_submission_are_closed_only_if_left_running(compose_cfg, tmp_path):
    from rn50.point import identity
    from rn50.launcher import slurm_jobs
    from rn50 import tracking
    from rn50.launcher import lifecycle

    empty_store_in(tmp_path)
    cfg = compose_cfg(["cluster=slurm", f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db"])
    parent = lifecycle.start_run(cfg, "sweep", {"rn50.role": "sweep"}, params=False)
    never_started, ran_out_of_memory, adopted, resumed_elsewhere = (
        slurm_jobs.make_run(cfg, parent, identity.config_hash(cfg)) for _ in range(4))
    slurm_jobs.close_run(cfg, never_started, "SLURM job 41 ended: CANCELLED DUE TO TIME LIMIT")
    tracking.runs.end_run(cfg.mlflow.tracking_uri, ran_out_of_memory, ok=False, tags={"failure": "oom"})
    slurm_jobs.close_run(cfg, ran_out_of_memory, "SLURM job 42 ended")
    oom = tracking.client.MlflowClient(cfg.mlflow.tracking_uri).get_run(ran_out_of_memory)
    assert oom.data.tags["failure"] == "oom"  # its own closing stands
    job = compose_cfg(["cluster=slurm", f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db", f"mlflow.run_id={adopted}"])
    with lifecycle.record(job, "point", {"cluster": "slurm"}, parent) as run_id:  # what the job's rank 0 does
        assert run_id == adopted
    # train.resume: the job goes on with the run it resumes, and the one made for it goes away.
    job = compose_cfg(["cluster=slurm", f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db",
                       f"mlflow.run_id={resumed_elsewhere}"])
    with lifecycle.record(job, "point", {"cluster": "slurm"}, parent, continue_run_id=ran_out_of_memory) as run_id:
        assert run_id == ran_out_of_memory

    runs = {r.info.run_id: r for r in runs_in(tmp_path)}
    assert len(runs) == 4  # the sweep and its three points: nothing made twice, nothing left over
    assert resumed_elsewhere not in runs
    assert runs[never_started].info.status == "FAILED" and runs[never_started].data.tags["failure"] == "slurm"
    assert "TIME LIMIT" in runs[never_started].data.tags["error"]
    assert runs[never_started].data.params["cluster.name"] == "slurm"  # still a row of the report
    assert runs[never_started].data.tags["mlflow.parentRunId"] == parent
    assert runs[never_started].data.tags["rn50.config_hash"] == identity.config_hash(cfg)  # resume supersedes it
    assert runs[ran_out_of_memory].info.status == "FINISHED"  # resumed, and finished this time
    assert runs[adopted].info.status == "FINISHED" and runs[adopted].data.params["mlflow.run_id"] == adopted
