"""A SLURM job's life: its MLflow run, made before it is submitted and closed by id if SLURM
ends the job before its rank 0 could; its submission, for one run (`submit_run`; a --multirun's
jobs are submitted by hydra_plugins/rn50_slurm, which Hydra takes launchers from); and the wait
for its end.

Every task is one rank: it runs the Hydra job (rn50/__main__.py) in submitit's own worker
process, so SLURM's signals reach the rank itself; it joins the others through Lightning's
SLURM environment, and rank 0 records the run.
"""

import logging
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rn50.config import keys
from rn50.config.reads import dist_name, run_name
from rn50.errors import RunFailed
from rn50.results import resume
from rn50.slurm import sbatch as slurm
from rn50 import tracking
from rn50.launcher import lifecycle

log = logging.getLogger("rn50")


# srun's line for the first task a signal ended: "srun: error: node2: task 1: Killed". (A task that
# exited with an error wrote that error to the log, whose last line says more.)
SRUN_TASK_ERROR = re.compile(r"^srun: error: (\S+): tasks? ([\d,-]+): (?!Exited with exit code)(.+)$", re.M)


def why_ended(text: str, otherwise: str) -> str:
    """Why a job ended, in one line, from its log: srun's word on the first task a signal ended
    (a rank is a task, so it names the rank and its node), else the log's last line, else
    `otherwise` (an empty log)."""
    first = SRUN_TASK_ERROR.search(text)
    if first:
        node, tasks, why = first.groups()
        return f"rank {tasks} on {node}: {why.strip()}"[:300]
    lines = [line for line in text.splitlines() if line.strip()] or otherwise.splitlines() or ["?"]
    return lines[-1].strip()[:300]


def make_run(cfg: DictConfig, parent: Optional[str], config_hash: str, overrides: Sequence[str] = ()) -> str:
    """The job's MLflow run, made before it is submitted: the job records into it (mlflow.run_id,
    logging its own config as params), and the submitting host closes it by this id if SLURM ends
    the job before its rank 0 could. Tagged with the point's hash, so that a later sweep.resume
    run of the point supersedes it in the report, and with its command (overrides: the job's), so
    that a sweep's report finds its point even where the job never started."""
    tags = {"cluster": "slurm", "dist": dist_name(cfg), tracking.runs.HASH_TAG: config_hash,
            "command": " ".join(["python -m rn50", *overrides])}
    return lifecycle.start_run(cfg, run_name(cfg), tags, parent, params=False)


def close_run(cfg: DictConfig, run_id: str, error: str) -> None:
    """FAILED (failure=slurm) if the job left its run RUNNING, with the point's config as params
    where the job logged none, so that it is still a row of the sweep's report. A run its rank 0
    closed keeps its own status and error, which say more."""
    uri = cfg.mlflow.tracking_uri
    client = tracking.client.open_client(uri)
    run = client.get_run(run_id)
    if run.info.status != "RUNNING":
        return
    cfg = OmegaConf.merge(cfg, {"mlflow": {"run_id": run_id}})  # as the job would have logged them
    tracking.runs.log_params(client, run_id, tracking.runs.config_params(cfg), run.data.params)
    tracking.runs.end_run(uri, run_id, ok=False, tags={"failure": "slurm", "error": error})


def outcome(job, cfg: DictConfig, run_id: str, check: Callable[[Any], Any] = lambda result: result) -> Tuple[bool, Any]:
    """(True, rank 0's result) once the job has ended well; (False, None) for a job that failed
    (or whose result `check` raises for) or that SLURM ended, whose run is closed by its id if its
    rank 0 could not."""
    end = wait(job)
    try:
        if not job.done():
            raise NoResult(f"ended with no result (squeue: {end or 'no answer'})")
        result = job.results()[0]
        check(result)
        return True, result
    except Exception as exc:  # submitit raises for a failed or killed job
        # With no result, squeue's state says how SLURM ended the job: the log's last line may be
        # an earlier start's (a requeued job whose next start failed before Python ran).
        how, otherwise = (str(exc), "its log is empty") if isinstance(exc, NoResult) else ("ended", str(exc))
        close_run(cfg, run_id, f"SLURM job {job.job_id} {how}: {why_ended(job.stderr() or '', otherwise)}")
        return False, None


class NoResult(RuntimeError):
    """The wait for the job is over (squeue said it ended, or answered nothing for long) and no
    task wrote a result."""


# What squeue says of a job that will not run again (a requeued or preempted one will).
ENDED = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT"}


def queue_state(job_id: str) -> Optional[str]:
    """The job's state in squeue; "GONE" once SLURM has forgotten it (MinJobAge after its end);
    None when squeue could not say (slurmctld busy, a time-out): ask again later."""
    try:
        done = subprocess.run(["squeue", "--noheader", "--format=%T", "--states=all", f"--jobs={job_id}"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return "GONE" if "invalid job id" in done.stderr.lower() else None
    return (done.stdout.split() or ["GONE"])[0]


def wait(job, poll_s: float = 2.0, squeue_every_s: float = 15.0, grace_s: float = 20.0,
         unknown_s: float = 300.0) -> Optional[str]:
    """Until every task has written its result, or the job has ended without: submitit asks sacct,
    which clusters without accounting cannot answer, so squeue is asked too, every squeue_every_s.
    A task that srun stopped after another task's failure writes no result. When neither can say
    for unknown_s, the wait ends rather than hangs. Returns the end squeue gave (FAILED, say;
    GONE where it had forgotten the job before it said how it ended), or None."""
    ended_at, asked, known_at, end = None, -squeue_every_s, time.monotonic(), None
    while not job.done():
        now = time.monotonic()
        # Past the grace after an end (result files on a slow file system), squeue is asked once more before
        # the wait ends: a job SLURM requeued meanwhile is PENDING again.
        past_grace = ended_at is not None and now - ended_at > grace_s
        if past_grace or now - asked >= squeue_every_s:
            asked, state = now, queue_state(job.job_id)
            if state is not None:  # a requeued job is PENDING again: it has not ended
                known_at, ended_at = now, (ended_at or now) if state in ENDED | {"GONE"} else None
                # The first word on an end is kept: squeue forgets the job MinJobAge after it.
                end = (state if end in (None, "GONE") else end) if ended_at is not None else None
                if past_grace and ended_at is not None:
                    return end
            elif now - known_at > unknown_s:
                log.warning("SLURM job %s: neither sacct nor squeue has answered for %d s", job.job_id, unknown_s)
                return end
        time.sleep(poll_s)
    return end


def not_submitted(exc: BaseException, runs: Sequence[Tuple[DictConfig, str]]) -> None:
    """sbatch refused a job, or Ctrl-C came before all were submitted: the runs made for jobs that
    were not submitted fail, and so does the command."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    for cfg, run_id in runs:
        close_run(cfg, run_id, f"not submitted: {lines[-1]}"[:300])
    if isinstance(exc, Exception):
        raise RunFailed(f"SLURM refused the job: {lines[-1]}", kind="slurm") from exc
    raise exc


def failed(job, cfg: DictConfig, run_id: str) -> RunFailed:
    """The command's error for a job that failed: the run's own error, where its rank 0 recorded one."""
    error = tracking.client.open_client(cfg.mlflow.tracking_uri).get_run(run_id).data.tags.get("error")
    why = f": {error}" if error else f"; the MLflow run's error tag and the job's log {job.paths.stderr} say why"
    return RunFailed(f"SLURM job {job.job_id} failed{why}")


class RankTask:
    """What each task of one run's job runs: `python -m rn50` with the submitting command's
    arguments, in submitit's worker process itself, as hydra_plugins/rn50_slurm runs a sweep's
    jobs. SLURM's signals (USR1 for a requeue, submitit's USR2 at the time limit) thus reach the
    rank, and hydra.* arguments (a searchpath, say) compose the task's config as they did here."""

    def __init__(self, argv: List[str]):
        self.argv = argv

    def __call__(self) -> bool:
        sys.argv = ["rn50", *self.argv]
        try:
            runpy.run_module("rn50", run_name="__main__")  # python -m rn50, as the command line runs it
        except SystemExit as exc:  # the error is in the task's log already, as one line
            if exc.code in (0, None):  # errors.Requeued: no result, so the submitting host waits on
                raise
            # An exception, so that submitit records this task's failure before srun ends the job.
            raise RuntimeError(f"python -m rn50 exited with status {exc.code}") from None
        return True

    def checkpoint(self, *args, **kwargs) -> None:
        """No requeue by submitit on a time-out: see hydra_plugins/rn50_slurm."""
        return None


def task_argv(argv: List[str], out: Path, run_id: str) -> List[str]:
    """The command's arguments for its tasks: its output directory and the run made for it."""
    ours = {"hydra.run.dir", "mlflow.run_id"}
    kept = [a for a in argv if a.lstrip("+~").split("=", 1)[0] not in ours]
    return [*kept, f"hydra.run.dir={keys.quoted(str(out))}", f"mlflow.run_id={run_id}"]


def submit_run(cfg: DictConfig, out: Path, config_hash: str, argv: List[str], cluster) -> Dict[str, Any]:
    """One run (no --multirun), from a login node: make its MLflow run, submit its job, wait for it; the
    run's metrics, or RunFailed. cfg: the run as preflight decided it (launcher/run.py checked it). The job's folder is out/.submitit/JOB_ID unless
    hydra.launcher.submitit_folder says otherwise. cluster: the run's cluster option."""
    launcher = slurm.launcher_params()
    if OmegaConf.to_container(HydraConfig.get().launcher)["submitit_folder"] == slurm.SWEEP_FOLDER:
        launcher["submitit_folder"] = str(out / ".submitit" / "%j")  # its own, not multirun/'s
    params = slurm.resources(cfg, launcher)
    slurm.check_nodes(cfg)
    tracking.health.check_reachable(cfg.mlflow.tracking_uri)

    # train.resume, or a new try of a requeued job: the job goes on with the run it continues.
    # (Not a requeue: SLURM_RESTART_COUNT here would be an enclosing sbatch script's.)
    continued = resume.run_to_continue(cfg, out, tracking.runs.config_params(cfg)) if cfg.train.resume else None
    run_id = continued or make_run(cfg, None, config_hash)
    try:
        job = slurm.submit(launcher, params, RankTask(task_argv(argv, out, run_id)))
    except BaseException as exc:
        not_submitted(exc, [] if continued else [(cfg, run_id)])
    log.info("SLURM job %s: sbatch %s; its log: %s", job.job_id, slurm.describe(params), job.paths.stderr)
    tracking.runs.log_results(cfg.mlflow.tracking_uri, run_id, {}, {"slurm_job_id": job.job_id})
    try:
        ok, _ = outcome(job, cfg, run_id)
    except KeyboardInterrupt as exc:  # the job is SLURM's now: it goes on, and its rank 0 closes the run
        exc.note = f"SLURM job {job.job_id} goes on and records run {run_id}; `scancel {job.job_id}` stops it"
        raise
    if not ok:  # outcome closed its run
        raise failed(job, cfg, run_id)
    run = tracking.client.open_client(cfg.mlflow.tracking_uri).get_run(run_id)
    if run.info.status != "FINISHED":
        close_run(cfg, run_id, f"SLURM job {job.job_id} ended with its run {run.info.status}")  # if left RUNNING
        raise failed(job, cfg, run_id)
    return {"run_id": run_id, "arch": cfg.model.arch.value, **run.data.metrics}
