"""cluster=slurm and cluster=torchrun without a cluster: the world torchrun must start, what a task
of a job step is, the command a task gets, and the job variables hidden when submitting from a job."""

import os

import pytest



def test_torchrun_world_must_match_dist(compose_cfg, monkeypatch):
    from rn50.launcher import launch
    from rn50.errors import ConfigError
    from rn50.options import clusters

    cfg = compose_cfg(["cluster=torchrun", "dist=1n2g"])
    cluster = clusters.of(cfg)
    with pytest.raises(ConfigError, match="torchrun did not start this process"):
        launch.process_rank(cfg, cluster)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(ConfigError, match="needs torchrun's --rdzv-id"):  # torchrun's default id, none
        launch.process_rank(cfg, cluster)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "rn50-test")
    with pytest.raises(ConfigError, match="dist=1n2g needs 2 processes but torchrun started 3"):
        launch.process_rank(cfg, cluster)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert launch.process_rank(cfg, cluster) == 1


def test_a_task_of_a_job_step_is_a_rank_and_sbatchs_own_shell_submits(compose_cfg, monkeypatch):
    from rn50.options import clusters

    slurm = clusters.of(compose_cfg(["cluster=slurm"]))
    for name in ("SLURM_STEP_ID", "SLURM_PROCID", "RANK"):
        monkeypatch.delenv(name, raising=False)
    assert not slurm.in_task()  # a login node
    monkeypatch.setenv("SLURM_PROCID", "0")  # sbatch's batch script, which is no step
    assert not slurm.in_task()
    monkeypatch.setenv("SLURM_STEP_ID", "0")  # a task srun started: submitit's, or launchers/rn50.sbatch's
    assert slurm.in_task()


def test_tasks_get_the_command_with_its_output_directory_and_run(tmp_path):
    from rn50.launcher.slurm_jobs import task_argv

    argv = ["cluster=slurm", "hydra.run.dir=mine", "++mlflow.run_id=old", "hydra.searchpath=[file:///c]"]
    out = tmp_path / "it's here"
    assert task_argv(argv, out, "abc") == [
        "cluster=slurm", "hydra.searchpath=[file:///c]", f"hydra.run.dir='{str(out).replace(chr(39), chr(92) + chr(39))}'",
        "mlflow.run_id=abc"]
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for path in (out, tmp_path / "a\\b", tmp_path / "x\\'y", tmp_path / "end\\"):
        (parsed,) = OverridesParser.create().parse_overrides(task_argv([], path, "abc")[:1])
        assert parsed.value() == str(path)  # Hydra reads the quoted path back as it was


def test_submitting_from_inside_a_job_hides_only_that_jobs_variables(monkeypatch):
    from rn50.slurm import sbatch as slurm

    monkeypatch.setenv("SBATCH_ACCOUNT", "proj")  # the user's own settings, for any sbatch
    monkeypatch.setenv("SLURM_CLUSTERS", "c2")
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/other.conf")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("SLURM_NTASKS", "7")
    with slurm.outside_job():  # a login node: nothing changes
        assert os.environ["SLURM_NTASKS"] == "7" and os.environ["SBATCH_ACCOUNT"] == "proj"
    monkeypatch.setenv("SLURM_JOB_ID", "12")  # an sbatch script
    monkeypatch.setenv("SLURM_MEM_PER_CPU", "100")
    with slurm.outside_job():
        assert not {"SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_MEM_PER_CPU"} & set(os.environ)
        assert (os.environ["SBATCH_ACCOUNT"], os.environ["SLURM_CLUSTERS"], os.environ["SLURM_CONF"]) == (
            "proj", "c2", "/etc/slurm/other.conf")
    assert os.environ["SLURM_JOB_ID"] == "12" and os.environ["SLURM_MEM_PER_CPU"] == "100"
