"""How rn50 measures: window timing and its statistics (timing), the device clock that marks step
boundaries (device, a rank's: it imports torch), the proof that a window trained (trained),
model FLOPs utilization against the peak table (timing), NVML's power and utilization (nvml), the
software and hardware a rank ran on (device), and the progress line's rates (meter)."""
