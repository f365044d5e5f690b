"""How the launcher waits for a SLURM job it submitted (rn50/launcher/slurm_jobs.py's wait), with squeue's
answers scripted: a job SLURM requeued shows as ended for a moment, and is waited for once it is PENDING again."""

from rn50.launcher import slurm_jobs


class Job:
    """A submitted job whose tasks write their results after `turns` looks (submitit's done())."""

    def __init__(self, turns: int):
        self.job_id, self.turns, self.looked = "7", turns, 0

    def done(self) -> bool:
        self.looked += 1
        return self.looked > self.turns


def answers(monkeypatch, *states):
    """squeue answers these states in turn, then the last one again."""
    said = list(states)
    monkeypatch.setattr(slurm_jobs, "queue_state", lambda job_id: said.pop(0) if len(said) > 1 else said[0])


def test_a_job_requeued_while_it_seemed_to_end_is_waited_for(monkeypatch):
    # CANCELLED as SLURM requeues it (its step cancelled), then PENDING, waiting to start again
    answers(monkeypatch, "CANCELLED", "PENDING")
    job = Job(turns=50)
    assert slurm_jobs.wait(job, poll_s=0.0, squeue_every_s=1e9, grace_s=0.0) is None  # no end: it ran again
    assert job.looked == 51  # it waited until the tasks' results were written


def test_a_job_that_ended_without_results_ends_the_wait(monkeypatch):
    answers(monkeypatch, "FAILED")
    job = Job(turns=10**9)
    assert slurm_jobs.wait(job, poll_s=0.0, squeue_every_s=1e9, grace_s=0.0) == "FAILED"
    assert job.looked < 10  # after the grace, not never


def test_the_wait_gives_how_the_job_ended_after_squeue_has_forgotten_it(monkeypatch):
    # MinJobAge ends squeue's memory of the job during the grace: its end was FAILED, not GONE
    answers(monkeypatch, "FAILED", "GONE")
    assert slurm_jobs.wait(Job(turns=10**9), poll_s=0.0, squeue_every_s=1e9, grace_s=0.0) == "FAILED"
    answers(monkeypatch, "GONE")  # forgotten before it said
    assert slurm_jobs.wait(Job(turns=10**9), poll_s=0.0, squeue_every_s=1e9, grace_s=0.0) == "GONE"


def test_squeue_that_cannot_say_is_asked_again_not_taken_for_an_end(monkeypatch):
    answers(monkeypatch, "GONE", None, None, "RUNNING")
    job = Job(turns=20)
    slurm_jobs.wait(job, poll_s=0.0, squeue_every_s=1e9, grace_s=0.0)
    assert job.looked == 21
