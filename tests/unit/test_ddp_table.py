"""benchmarks/scripts/ddp_table.py, the table of ddp_gpu.sh's cases: each case's scaling against the 1-GPU case
of its kind with the same settings, whichever GPU the 1-GPU case ran on and whichever run it was."""

import importlib.util
import json

from helpers import ROOT

spec = importlib.util.spec_from_file_location("ddp_table", ROOT / "benchmarks" / "scripts" / "ddp_table.py")
ddp_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ddp_table)

FAST = "batch_size_512_compile_true_compile_mode_reduce-overhead"


def test_rn50_and_the_bare_loop_each_scale_against_their_own_1_gpu_case(tmp_path, capsys):
    cases = {  # what orch6.sh's phases name them: 1-GPU runs pinned to a GPU, second runs, both kinds
        "nvl-1-rn50-experiment_fastest_run_2_cuda_visible_devices_0": {"throughput/images_per_sec": 7800.0},
        "nvl-4-rn50-experiment_fastest": {"throughput/images_per_sec": 30420.0, "gpu/sm_clock_mhz_min": 1602.8},
        "nvl-4-rn50-experiment_fastest_run_2": {"throughput/images_per_sec": 29640.0},
        f"nvl-1-bare-{FAST}_run_2_cuda_visible_devices_0": {"baseline": "bare_pytorch", "images_per_sec": 7900.0},
        f"nvl-4-bare-{FAST}": {"baseline": "bare_pytorch", "images_per_sec": 30810.0,
                               "comm/allreduce_before_ms": 0.45, "comm/allreduce_ms": 0.48},
        "sock-4-rn50-experiment_fastest": {"throughput/images_per_sec": 12000.0},  # another transport: no base
    }
    for name, figures in cases.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(figures))
    ddp_table.main([str(tmp_path)])
    table = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]}
    scaling = {case: cells[3] for case, cells in table.items()}
    assert scaling["nvl-4-rn50-experiment_fastest"] == "0.9750"  # 30,420 / (4 x 7,800)
    assert scaling["nvl-4-rn50-experiment_fastest_run_2"] == "0.9500"
    assert scaling[f"nvl-4-bare-{FAST}"] == "0.9750"  # 30,810 / (4 x 7,900): the bare loop's own
    assert scaling["sock-4-rn50-experiment_fastest"] == "-"
    assert table[f"nvl-4-bare-{FAST}"][8] == "0.45 -> 0.48"  # the all-reduce before the warm-up -> after
    assert table["nvl-4-rn50-experiment_fastest"][14] == "1603 |"  # the slowest GPU's clock, last
    assert table[f"nvl-4-bare-{FAST}"][14] == "- |"
