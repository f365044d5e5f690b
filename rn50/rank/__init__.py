"""The rank process (python -m rn50.rank, or this process under torchrun and SLURM: here). It
imports torch and Lightning: a throughput run (run) with the Trainer every run builds (trainer)
and the callback that times its windows (throughput), train=accuracy's run (training), the
batch search of data.batch_size=auto (batch_search) and the progress line (progress)."""

from rn50.measure import comm, settings

# What the rank's process sets before torch, CUDA, NCCL or inductor read it. Here, on the package's
# first import, ahead of every rank module's imports: importing Lightning already makes inductor fix
# its cache directory (it sets TORCHINDUCTOR_CACHE_DIR to its /tmp default), so a later call finds it
# "set by the user" and the lasting cache would never be used.
settings.set_cuda_connections()  # before this rank makes its CUDA context
comm.log_transports()  # before NCCL starts: the transport its channels take is in its log
settings.set_compile_cache()  # one cache for the host's ranks and later runs
