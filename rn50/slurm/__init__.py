"""SLURM: the sbatch resources, submitit calls and a job's restarts (sbatch). One run's job, submitted and
waited on from a login node, is the launcher's (rn50/launcher/slurm_jobs.py)."""
