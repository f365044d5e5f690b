"""The rank process (python -m rn50.rank, or this process under torchrun and SLURM: here). It
imports torch and Lightning: a throughput run (run) with the Trainer every run builds (trainer)
and the callback that times its windows (throughput), train=accuracy's run (training), the
batch search of data.batch_size=auto (batch_search) and the progress line (progress)."""
