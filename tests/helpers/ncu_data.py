"""Nsight Compute's outputs in tests/data, as the tests of profiler=ncu read them."""
from helpers import DATA

# Six kernels cut from `ncu --import R --csv --page raw --print-units base` of one ResNet-50
# AMP step (batch 64) on an H100, Nsight Compute 2025.3: header, units row, kernel rows.
RAW = DATA / "ncu_raw_h100_amp.csv"
NO_PERMISSION = (DATA / "ncu_no_permission.log").read_text()  # ncu's log where counters need root
FINE = (DATA / "ncu_fine.log").read_text()  # the first and last lines of a real run's log
