"""How rn50 measures: window timing and its statistics, and model FLOPs utilization against the peak
table (timing), the device clock that marks step boundaries and the software and hardware a rank ran
on (device, a rank's: it imports torch), the proof that a window trained (trained), the all-reduce's
cost and transport (comm), NVML's power and utilization (nvml), this host's processes (host), a rank
process's settings and heap (settings), and the progress line's rates (meter)."""
