"""Beyond one host: cluster=slurm on a real one-node SLURM cluster, and the dry runs that print what
cluster=slurm and cluster=torchrun would start. Runs across two hosts: tests/e2e/test_multi_node.py."""

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, TINY
from helpers.cli import rn50
from helpers.store import empty_store_in, runs_in

pytestmark = pytest.mark.slow  # real SLURM jobs and torchrun processes

CPU_PAIR = [*TINY, "dist=1n2g"]  # two gloo ranks


def one_error(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("rn50: error: "), stderr[-2000:]
    return errors[0]


def test_slurm_run_and_sweep(slurm_cluster, tmp_path):
    one, sweep, bad = tmp_path / "one", tmp_path / "sweep", tmp_path / "bad"
    for cwd in (one, sweep, bad):
        cwd.mkdir()
        empty_store_in(cwd)
    # The single run's dist option is the user's own, found through hydra.searchpath: the tasks
    # compose the submitting command's config, hydra.* arguments included.
    (one / "myconf" / "dist").mkdir(parents=True)
    (one / "myconf" / "dist" / "pair.yaml").write_text("nodes: 1\ngpus_per_node: 2\n")
    # All at once, as users would: four jobs of one and two tasks share the test cluster. In `bad`
    # every rank runs out of memory (a batch no allocator holds); srun ends the job, none waits.
    commands = {one: ["cluster=slurm", *TINY, "dist=pair", f"hydra.searchpath=[file://{one / 'myconf'}]"],
                sweep: ["--multirun", "cluster=slurm", *TINY, "dist=1n1g,1n2g"],
                bad: ["cluster=slurm", *CPU_PAIR, "data.batch_size=100000000"]}
    env = {**slurm_cluster.env, "PYTHONPATH": str(ROOT)}
    procs = {cwd: subprocess.Popen([sys.executable, "-m", "rn50", *args], cwd=cwd, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE) for cwd, args in commands.items()}
    outputs = {cwd: proc.communicate() for cwd, proc in procs.items()}
    stderr = {cwd: err for cwd, (_, err) in outputs.items()}
    assert procs[one].returncode == 0, stderr[one][-3000:]
    assert procs[sweep].returncode == 0, stderr[sweep][-3000:]

    assert procs[bad].returncode == 1
    # The test cluster keeps no accounting, so submitit warns that sacct failed on every poll.
    errors = [line for line in stderr[bad].splitlines() if line.startswith("rn50: error:")]
    assert len(errors) == 1 and "SLURM job" in errors[0], stderr[bad][-3000:]
    (failed,) = runs_in(bad)
    assert failed.info.status == "FAILED" and failed.data.tags["failure"] == "oom"
    assert failed.data.tags["error"] in errors[0]  # the rank's own error reaches the command

    (run,) = runs_in(one)  # one point is one run, no sweep parent, no multirun directory
    assert run.info.status == "FINISHED"
    t = run.data.tags
    assert (t["world_size"], t["cluster"], t["node_hostnames"]) == ("2", "slurm", f"0:{socket.gethostname()}")
    assert t["slurm_job_id"].isdigit() and "rn50.role" not in t
    out = Path(t["output_dir"])
    assert out.parent.parent == one / "outputs" and not (one / "multirun").exists()
    assert (out / ".submitit" / t["slurm_job_id"]).is_dir()  # the job's logs, beside its results
    said = "".join(outputs[one])
    assert "images/sec" in said and "MLflow run " + run.info.run_id in said  # the headline, here

    runs = runs_in(sweep)
    (parent,) = [r for r in runs if r.data.tags.get("rn50.role") == "sweep"]
    children = [r for r in runs if r is not parent]
    assert sorted(r.data.tags["world_size"] for r in children) == ["1", "2"]  # resources per job
    for child in children:
        assert child.info.status == "FINISHED"
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert len({r.data.tags["slurm_job_id"] for r in children}) == 2  # one job per point
    assert parent.info.status == "FINISHED"
    assert list(Path(parent.data.tags["sweep.dir"]).glob("sweep_report.md")), "no report on the submitting host"


def job_ids(cluster) -> set:
    """Every job SLURM still knows of: queued, running, or ended within MinJobAge."""
    done = subprocess.run(["scontrol", "--oneliner", "show", "jobs"], env=cluster.env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return {word.split("=", 1)[1] for word in done.stdout.split() if word.startswith("JobId=")}


def test_slurm_errors_come_before_submission(slurm_cluster, tmp_path):
    # Jobs of earlier tests may still be ending (their submitters return once rank 0's result is
    # written), so the check is that these commands added none, not that the queue is empty.
    before = job_ids(slurm_cluster)
    proc = rn50(tmp_path, "cluster=slurm", *TINY, "dist=2n8g", env=slurm_cluster.env)
    assert proc.returncode == 2
    assert f"needs 2 nodes but SLURM partition {slurm_cluster.partition} has 1" in one_error(proc.stderr)
    proc = rn50(tmp_path, "cluster=slurm", *TINY, "mlflow.tracking_uri=http://127.0.0.1:9", env=slurm_cluster.env)
    assert proc.returncode == 2 and "is unreachable" in one_error(proc.stderr)
    assert job_ids(slurm_cluster) <= before and not runs_in(tmp_path)
    assert not list(tmp_path.rglob(".submitit")), "a job folder was made: something was submitted"


def test_dry_runs_show_the_resources(tmp_path):
    proc = rn50(tmp_path, "--multirun", "cluster=slurm", "dist=2n8g,4n8g", "dry_run=true")
    assert proc.returncode == 0, proc.stderr[-2000:]
    jobs = [line for line in proc.stdout.splitlines() if line.startswith("job ")]
    assert [job.split("  # ")[0] for job in jobs] == [
        "job 0: sbatch --nodes=2 --ntasks-per-node=8 --gpus-per-node=8 --time=60",
        "job 1: sbatch --nodes=4 --ntasks-per-node=8 --gpus-per-node=8 --time=60",
    ]
    proc = rn50(tmp_path, "--multirun", "cluster=torchrun", "dist=2n8g,4n8g", "dry_run=true",
                "cluster.rdzv_endpoint=n0:29500")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for dist, nodes in (("2n8g", 2), ("4n8g", 4)):
        commands = [line.split(": ", 1)[1] for line in proc.stdout.splitlines()
                    if line.startswith("node ") and f"dist={dist}" in line]
        assert len(commands) == nodes and len(set(commands)) == 1
        assert commands[0].startswith(f"torchrun --nnodes={nodes} --nproc-per-node=8 --rdzv-backend=c10d "
                                      "--rdzv-endpoint=n0:29500 --rdzv-id=rn50-")
        assert f" -m rn50 cluster=torchrun dist={dist} " in commands[0]
    assert not runs_in(tmp_path)


def test_the_sbatch_template_runs_one_rank_per_task(slurm_cluster, tmp_path):
    empty_store_in(tmp_path)
    env = {**slurm_cluster.env, "PYTHONPATH": str(ROOT), "RN50_PYTHON": sys.executable}
    done = subprocess.run(
        ["sbatch", "--wait", "--ntasks-per-node=2", "--gpus-per-node=0", str(ROOT / "launchers/rn50.sbatch"),
         *CPU_PAIR], cwd=tmp_path, env=env, capture_output=True, text=True)
    logs = "".join(p.read_text() for p in tmp_path.glob("rn50-*.out"))
    assert done.returncode == 0, done.stderr + logs[-3000:]
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FINISHED" and run.data.tags["world_size"] == "2"
    assert Path(run.data.tags["output_dir"]).name == f"slurm-{run.data.tags['slurm_job_id']}"


def test_a_job_sbatch_refuses_has_its_run_closed_by_id(slurm_cluster, tmp_path):
    # The run is made before the job is submitted. The test cluster has no GPUs, which only sbatch
    # knows, so it refuses the job; the run made for it is closed by its id, as FAILED.
    proc = rn50(tmp_path, "cluster=slurm", *TINY, "dist.accelerator=gpu", env=slurm_cluster.env)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("rn50: error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FAILED" and run.data.tags["failure"] == "slurm"
    assert run.data.tags["error"].startswith("not submitted: ")
    assert run.data.params["mlflow.run_id"] == run.info.run_id  # the id the job would have been given


def test_a_job_that_dies_without_a_result_is_seen_to_end(slurm_cluster, compose_cfg, tmp_path, monkeypatch):
    # The test cluster keeps no accounting, like some real ones: submitit's sacct cannot say that a
    # job whose task was killed has ended, so rn50 asks squeue, and closes the job's run.
    import functools
    import threading

    from rn50.point import identity
    from rn50.slurm import sbatch as slurm
    from rn50.launcher import slurm_jobs
    from rn50 import tracking

    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    # The same wait, asking squeue every 1 s instead of 15 and granting result files a 2 s grace instead of
    # 20: the test waits for the logic, not for a slow file system's grace.
    monkeypatch.setattr(slurm_jobs, "wait", functools.partial(slurm_jobs.wait, squeue_every_s=1.0, grace_s=2.0))
    empty_store_in(tmp_path)
    cfg = compose_cfg(["cluster=slurm", f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db"])
    run_id = slurm_jobs.make_run(cfg, None, identity.config_hash(cfg))
    launcher = {"submitit_folder": str(tmp_path / "%j"), "max_num_timeout": 0}
    params = {"timeout_min": 5, "nodes": 1, "tasks_per_node": 1, "additional_parameters": {}}
    job = slurm.submit(launcher, params, functools.partial(os._exit, 9))  # killed: no result written
    seen = []
    waiting = threading.Thread(target=lambda: seen.append(slurm_jobs.outcome(job, cfg, run_id)), daemon=True)
    waiting.start()
    waiting.join(timeout=180)  # a wait that never ends fails the test instead of hanging it
    assert seen == [(False, None)]
    run = tracking.client.MlflowClient(cfg.mlflow.tracking_uri).get_run(run_id)
    assert run.info.status == "FAILED" and run.data.tags["failure"] == "slurm"
    said = re.search(rf"SLURM job {job.job_id} ended with no result \(squeue: (\w+)\): ", run.data.tags["error"])
    assert said and said.group(1) in slurm_jobs.ENDED | {"GONE"}, run.data.tags["error"]


def test_a_command_in_an_sbatch_script_submits_a_job_of_its_own(slurm_cluster, tmp_path):
    # sbatch's own shell has SLURM_PROCID=0 and SLURM_NTASKS=2 but is no step: the command submits,
    # as from a login node, instead of failing as rank 0 of a 2-task world that dist=1n1g refuses.
    empty_store_in(tmp_path)
    script = (f"#!/bin/bash\ncd {tmp_path}\nexec {sys.executable} -m rn50 cluster=slurm "
              + " ".join(TINY) + " dist=1n1g hydra.run.dir=inner\n")
    env = {**slurm_cluster.env, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["sbatch", "--wait", "--ntasks=2", f"--output={tmp_path}/outer.out"], input=script,
                          env=env, capture_output=True, text=True)
    log = (tmp_path / "outer.out").read_text() if (tmp_path / "outer.out").exists() else ""
    assert done.returncode == 0, done.stderr + log[-3000:]
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FINISHED" and run.data.tags["world_size"] == "1"
    outer = done.stdout.split()[-1]
    assert run.data.tags["slurm_job_id"] != outer  # a job of its own, not the script's
