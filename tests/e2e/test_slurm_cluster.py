"""The one-node SLURM test cluster runs multi-task jobs the way submitit launches them."""
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

pytestmark = pytest.mark.slow  # a real SLURM cluster


# What torch.distributed / Lightning's SLURMEnvironment read in each task, and SLURM_STEP_ID, by
# which rn50 tells a task (a rank) from sbatch's own shell (which submits).
TASK_VARS = ["SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_ID",
             "SLURM_NODELIST", "SLURM_JOB_NAME", "SLURM_JOB_ID", "FOO"]


def sbatch(cluster, script, out, *args, env=None):
    """`sbatch --wait ARGS` with the batch script on stdin and its output in out; returns once the job ended."""
    return subprocess.run(["sbatch", "--wait", "--nodes=1", "--ntasks-per-node=2", f"--output={out}", *args],
                          input=script, env=env or cluster.env, capture_output=True, text=True)


def test_srun_tasks_see_their_rank_and_the_submitters_env(slurm_cluster, tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(f"import json, os\nprint(json.dumps({{k: os.environ.get(k) for k in {TASK_VARS!r}}}))\n")
    # As submitit's batch script does: srun starts one Python process per task.
    script = f"#!/bin/bash\nsrun --unbuffered --output={tmp_path}/task_%t.out {sys.executable} -u {probe}\n"
    done = sbatch(slurm_cluster, script, tmp_path / "job.out", "--job-name=probe",
                  env={**slurm_cluster.env, "FOO": "bar"})
    assert done.returncode == 0, (tmp_path / "job.out").read_text()

    tasks = [json.loads((tmp_path / f"task_{t}.out").read_text()) for t in range(2)]
    job_id = tasks[0]["SLURM_JOB_ID"]
    for rank, seen in enumerate(tasks):
        assert seen == {
            "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "2", "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(rank), "SLURM_NODEID": "0", "SLURM_STEP_ID": "0", "SLURM_NODELIST": slurm_cluster.node,
            "SLURM_JOB_NAME": "probe", "SLURM_JOB_ID": job_id,
            "FOO": "bar",  # sbatch exports the submitter's environment by default
        }


def test_two_jobs_run_at_once(slurm_cluster, tmp_path):
    # Each job waits for the other to have started: both succeed only if they ran concurrently.
    def script(me, other):
        return (f"#!/bin/bash\nsrun true\ntouch {tmp_path}/{me}\n"
                f"for i in $(seq 100); do [ -e {tmp_path}/{other} ] && exit 0; sleep 0.1; done\nexit 1\n")

    with ThreadPoolExecutor(2) as pool:
        jobs = {me: pool.submit(sbatch, slurm_cluster, script(me, other), tmp_path / f"{me}.out")
                for me, other in (("a", "b"), ("b", "a"))}
        for me, job in jobs.items():
            assert job.result().returncode == 0, f"job {me} never saw the other start"
