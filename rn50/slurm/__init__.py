"""SLURM: the sbatch resources and submitit calls (sbatch), and one run's job submitted and
waited on from a login node (jobs)."""
