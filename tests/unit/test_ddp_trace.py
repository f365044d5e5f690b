"""benchmarks/scripts/ddp_trace.py on a small Chrome trace written here: a step's device work split into
compute and NCCL, and the work beside it on other streams (a data pipeline's) counted by kind."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scripts" / "ddp_trace.py"
spec = importlib.util.spec_from_file_location("ddp_trace", SCRIPT)
ddp_trace = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ddp_trace)


def kernel(ts, dur, name, stream, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": {"stream": stream}}


def trace(tmp_path, beside=True) -> str:
    """Three optimizer ends, so two whole steps of 60 compute kernels of 100 us each on stream 7, one
    NCCL kernel of 500 us on stream 17, and (beside) a decoder kernel of 300 us and a copy of 200 us on
    stream 40 in each step."""
    events, t = [kernel(0, 10, "multi_tensor_apply_kernel<FusedSgd>", 7)], 10
    for _ in range(2):
        start = t
        for _ in range(60):
            events.append(kernel(t, 100, "void cutlass_conv<float>(Params)", 7))
            t += 100
        events.append(kernel(start + 1000, 500, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(Args)", 17))
        if beside:
            events.append(kernel(start + 2000, 300, "void nvjpeg::rgba2rgb<(nvjpegOutputFormat_t)5>(x)", 40))
            events.append(kernel(start + 2500, 200, "Memcpy HtoD (Pinned -> Device)", 40, cat="gpu_memcpy"))
        events.append(kernel(t, 10, "multi_tensor_apply_kernel<FusedSgd>", 7))
        t += 10
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def test_the_work_beside_each_step_is_counted_by_kind(tmp_path, capsys):
    steps = ddp_trace.steps(ddp_trace.kernels(trace(tmp_path)))
    assert len(steps) == 2
    row = ddp_trace.describe(*steps[0])
    assert row["side_ms"] == 0.5  # the decoder's 300 us and the copy's 200 us; NCCL's 500 us is not side work
    assert row["nccl_kernels"] == 1
    ddp_trace.main([trace(tmp_path)])
    out = capsys.readouterr().out
    assert "side_ms 0.50" in out
    assert "beside the step, ms a step: nvjpeg::rgba2rgb 0.30, Memcpy HtoD 0.20" in out


def test_a_step_with_nothing_beside_it_prints_no_side_line(tmp_path, capsys):
    ddp_trace.main([trace(tmp_path, beside=False)])
    out = capsys.readouterr().out
    assert "side_ms 0.00" in out and "beside the step" not in out
