"""What the profiler option runs in a rank: torch.profiler (torch_profile), Nsight Compute's
launcher and range (ncu, ncu_range), and NVTX ranges (nvtx)."""
