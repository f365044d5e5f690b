"""profiler=ncu without a GPU: the CSV aggregation, ncu's errors, the checks before a run."""

import sys

import pytest

from helpers import DATA
from helpers.ncu_data import FINE, NO_PERMISSION, RAW
from rn50.options.components import Options
from rn50.profiling import ncu
from rn50.errors import ConfigError, RunFailed
from rn50.config.schema import Accelerator

TENSOR = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
FMA = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
ALU = "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"


def test_pipe_utilization_is_weighted_by_kernel_duration():
    m = ncu.aggregate(RAW, {"tensor_pipe_pct": TENSOR, "fma_pipe_pct": FMA, "alu_pipe_pct": ALU})
    # durations (ns, thousands separators dropped): 2752 + 46656 + 31584 + 31520 + 24512 + 2976 = 140000
    assert m["ncu/kernels"] == 6
    assert m["ncu/profiled_gpu_ms"] == pytest.approx(0.14)
    # tensor: 0.01*2752 + 35.82*46656 + 0.49*31584 + 73.39*31520 + 0*24512 + 0*2976
    #       = 27.52 + 1671217.92 + 15476.16 + 2313252.8 = 3999974.4; / 140000
    assert m["ncu/tensor_pipe_pct"] == pytest.approx(3999974.4 / 140000)
    # fma: 0.86*2752 + 2.63*46656 + 15.24*31584 + 1.96*31520 + 4.30*24512 + 0.01*2976
    #    = 2366.72 + 122705.28 + 481340.16 + 61779.2 + 105401.6 + 29.76 = 773622.72; / 140000
    assert m["ncu/fma_pipe_pct"] == pytest.approx(773622.72 / 140000)
    # alu: 1.29*2752 + 12.50*46656 + 19.60*31584 + 10.43*31520 + 11.18*24512 + 0.05*2976
    #    = 3550.08 + 583200 + 619046.4 + 328753.6 + 274044.16 + 148.8 = 1808743.04; / 140000
    assert m["ncu/alu_pipe_pct"] == pytest.approx(1808743.04 / 140000)


# Whole reports, as rn50 exported them on an H100 (Nsight Compute 2025.3.1, torch 2.11, batch 256):
# `python -m rn50 precision=amp profiler=ncu` (one step, 636 kernels) and
# `python -m rn50 precision=fp32 profiler=ncu bench.warmup_steps=5 bench.steps=10` (923 kernels).
# The expected figures were computed apart from rn50, with Python's csv module: for each metric,
# sum(pct * gpu__time_duration.sum) / sum(gpu__time_duration.sum) over every kernel row.
REPORTS = {
    "amp": (636, 50846464, {"tensor_pipe_pct": 15.860364529576733, "fma_pipe_pct": 8.665866634108523,
                            "fp16_pipe_pct": 3.587698759937367, "sfu_pipe_pct": 1.5115718914101874,
                            "alu_pipe_pct": 15.658918519879766}),
    "fp32": (923, 265713568, {"tensor_pipe_pct": 0.2900674952360732, "fma_pipe_pct": 37.0295605975228,
                              "fp16_pipe_pct": 0.0, "sfu_pipe_pct": 0.5617558660760598,
                              "alu_pipe_pct": 16.23899712520515}),
}


@pytest.mark.parametrize("precision", sorted(REPORTS))
def test_a_real_report_gives_the_hand_computed_figures(compose_cfg, precision):
    kernels, total_ns, expected = REPORTS[precision]
    m = ncu.aggregate(DATA / f"ncu_h100_{precision}.csv",
                      compose_cfg(["profiler=ncu"]).profiler.metrics)
    assert m["ncu/kernels"] == kernels
    assert m["ncu/profiled_gpu_ms"] == pytest.approx(total_ns / 1e6)
    for name, value in expected.items():
        assert m[f"ncu/{name}"] == pytest.approx(value, rel=1e-9, abs=1e-12), name


def test_a_metric_ncu_did_not_report_is_left_out_with_a_warning(compose_cfg, caplog):
    metrics = compose_cfg(["profiler=ncu"]).profiler.metrics  # this CSV has no fp16 or xu column
    m = ncu.aggregate(RAW, metrics)
    assert {"ncu/tensor_pipe_pct", "ncu/fma_pipe_pct", "ncu/alu_pipe_pct"} <= set(m)
    assert "ncu/fp16_pipe_pct" not in m and "ncu/sfu_pipe_pct" not in m
    assert "sm__inst_executed_pipe_xu" in caplog.text and "ncu/sfu_pipe_pct" in caplog.text


def test_durations_in_other_units_are_converted(tmp_path):
    # The same kernels with the duration column in microseconds: the weights keep their ratios.
    lines = RAW.read_text().splitlines()
    lines[1] = lines[1].replace('"ns","ns"', '"us","usecond"')
    (tmp_path / "us.csv").write_text("==PROF== a line ncu printed first\n" + "\n".join(lines) + "\n")
    m = ncu.aggregate(tmp_path / "us.csv", {"tensor_pipe_pct": TENSOR})
    assert m["ncu/profiled_gpu_ms"] == pytest.approx(140.0)
    assert m["ncu/tensor_pipe_pct"] == pytest.approx(3999974.4 / 140000)


def test_ncu_errors_become_one_line_with_the_fix(tmp_path):
    assert ncu.log_error(FINE) is None
    message = ncu.log_error(NO_PERMISSION)
    assert "NVreg_RestrictProfilingToAdminUsers=0" in message and "root" in message
    assert "https://developer.nvidia.com/ERR_NVGPUCTRPERM" in message and "\n" not in message
    assert ncu.log_error("==ERROR== Failed to connect to process\n") == "ncu failed: Failed to connect to process (see ncu.log)"
    # the worker's own failure is reported from its error file, not as ncu's
    assert ncu.log_error("==ERROR== The application returned an error code (1).\n") is None
    (tmp_path / ncu.LOG).write_text(NO_PERMISSION)
    with pytest.raises(RunFailed) as info:
        ncu.check_log(tmp_path / ncu.LOG)
    assert info.value.kind == "profiler"


def test_ncu_wraps_the_worker_and_collects_only_between_start_and_stop(compose_cfg, tmp_path):
    cfg = compose_cfg(["profiler=ncu", f"profiler.executable={sys.executable}"])
    cmd = ncu.command(cfg, tmp_path)
    assert cmd[0] == sys.executable
    def flag(name):
        return cmd[cmd.index(name) + 1]

    assert flag("--profile-from-start") == "off" and flag("--clock-control") == "none"
    assert flag("--metrics").split(",") == [ncu.DURATION, *cfg.profiler.metrics.values()]
    assert flag("--export") == str(tmp_path / "ncu") and flag("--log-file") == str(tmp_path / ncu.LOG)


@pytest.mark.parametrize("override,key", [("dist=1n2g", "dist=1n2g"), ("dist.accelerator=cpu", "dist.accelerator=cpu")])
def test_ncu_needs_one_gpu_process(compose_cfg, override, key):
    cfg = compose_cfg(["profiler=ncu", f"profiler.executable={sys.executable}", override])
    if cfg.dist.accelerator == Accelerator.auto:
        cfg.dist.accelerator = Accelerator.gpu  # as launch.preflight resolves it on a GPU host
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ncu.preflight(cfg)


def test_ncu_not_on_path_names_the_key(compose_cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a GPU host without Nsight Compute, wherever this runs
    with pytest.raises(ConfigError) as info:
        ncu.preflight(compose_cfg(["profiler=ncu", "dist.accelerator=gpu"]))
    assert str(info.value).startswith("profiler=ncu needs Nsight Compute's ncu, not found as 'ncu' on PATH;")
    assert "profiler.executable=/path/to/ncu" in str(info.value)


def test_a_host_with_neither_a_gpu_nor_ncu_hears_of_the_gpu_first(compose_cfg, tmp_path, monkeypatch):
    # Installing Nsight Compute would not help it: the first line says what would.
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError) as info:
        ncu.preflight(compose_cfg(["profiler=ncu", "dist.accelerator=cpu"]))
    assert str(info.value) == ("dist.accelerator=cpu: profiler=ncu profiles GPU kernels and needs a GPU; use "
                               "dist.accelerator=gpu on a host with one")


def test_ncu_refuses_ranks_that_another_starter_starts(compose_cfg):
    """The profiler's preflight reads the cluster option the launcher built with it (self.run): under
    torchrun, ncu cannot start the one process it profiles."""
    cfg = compose_cfg(["profiler=ncu", f"profiler.executable={sys.executable}", "cluster=torchrun",
                       "dist.accelerator=gpu"])
    torchrun = Options.of(cfg).cluster
    with pytest.raises(ConfigError, match="cluster=torchrun: profiler=ncu starts its one process under ncu"):
        Options.of(cfg, cluster=torchrun).profiler.preflight(cfg)
    # The option handed in decides, not one built from the config: each disagrees with the config here.
    local = compose_cfg(["profiler=ncu", f"profiler.executable={sys.executable}", "dist.accelerator=gpu"])
    local_cluster = Options.of(local).cluster
    Options.of(cfg, cluster=local_cluster).profiler.preflight(cfg)  # a local cluster option: accepted
    with pytest.raises(ConfigError, match="profiler=ncu starts its one process under ncu"):
        Options.of(local, cluster=torchrun).profiler.preflight(local)  # torchrun's: refused
