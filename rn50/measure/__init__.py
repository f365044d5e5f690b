"""How rn50 measures: window timing (timing), the Lightning callback that measures the windows
(throughput), the proof that a window trained (trained), model FLOPs utilization (mfu),
NVML's power and utilization (nvml), the software and hardware a run had (environment), and
the progress line's rates (meter)."""
