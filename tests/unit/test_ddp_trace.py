"""benchmarks/scripts/ddp_trace.py on a small Chrome trace written here: a step's device work split into
compute and NCCL, the training stream's work, and the work beside it on other streams (a data
pipeline's) counted by kind."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scripts" / "ddp_trace.py"
spec = importlib.util.spec_from_file_location("ddp_trace", SCRIPT)
ddp_trace = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ddp_trace)

SGD, SCALE = "multi_tensor_apply_kernel<FusedSgd>", "amp_update_scale_cuda_kernel"


def kernel(ts, dur, name, stream, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": {"stream": stream}}


def trace(tmp_path, beside=True) -> str:
    """Three optimizer ends (fused SGD, then amp's scale update), so two whole steps of 60 compute
    kernels of 100 us each on stream 7, one NCCL kernel of 500 us on stream 17, and (beside) a decoder
    kernel of 300 us and a copy of 200 us on stream 40 in each step, the copy between the step's two
    optimizer kernels. The trace opens with a copy on stream 40, before any training work."""
    events = [kernel(0, 5, "Memcpy HtoD (Pinned -> Device)", 40, cat="gpu_memcpy")] if beside else []
    events += [kernel(10, 10, SGD, 7), kernel(20, 10, SCALE, 7)]
    t = 30
    for _ in range(2):
        start = t
        for _ in range(60):
            events.append(kernel(t, 100, "void cutlass_conv<float>(Params)", 7))
            t += 100
        events.append(kernel(start + 1000, 500, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(Args)", 17))
        events.append(kernel(t, 10, SGD, 7))
        if beside:
            events.append(kernel(start + 2000, 300, "void nvjpeg::rgba2rgb<(nvjpegOutputFormat_t)5>(x)", 40))
            events.append(kernel(t + 12, 200, "Memcpy HtoD (Pinned -> Device)", 40, cat="gpu_memcpy"))
        events.append(kernel(t + 20, 10, SCALE, 7))
        t += 30
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def test_the_work_beside_each_step_is_counted_by_kind(tmp_path, capsys):
    work = ddp_trace.kernels(trace(tmp_path))
    train = ddp_trace.optimizer_stream(work)
    assert train == 7
    steps = ddp_trace.steps(work, train)
    assert len(steps) == 2  # a copy between the fused SGD and the scale update does not end a step
    row = ddp_trace.describe(*steps[0], train)
    assert row["side_ms"] == 0.5  # the decoder's 300 us and the copy's 200 us; NCCL's 500 us is not side work
    assert row["main_ms"] == 6.02  # 60 x 100 us and the two optimizer kernels
    assert row["nccl_kernels"] == 1
    ddp_trace.main([trace(tmp_path)])
    out = capsys.readouterr().out
    assert "main_ms 6.02, side_ms 0.50" in out
    assert "beside the step, mean ms a step: nvjpeg::rgba2rgb 0.30, Memcpy HtoD 0.20" in out


def test_a_step_with_nothing_beside_it_prints_no_side_line(tmp_path, capsys):
    ddp_trace.main([trace(tmp_path, beside=False)])
    out = capsys.readouterr().out
    assert "side_ms 0.00" in out and "beside the step" not in out


def test_kinds_drop_templates_parameters_and_anonymous_namespaces():
    assert ddp_trace.kind("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<X>(Y)") == \
        "at::native::multi_tensor_apply_kernel"
    assert ddp_trace.kind("Memcpy HtoD (Pinned -> Device)") == "Memcpy HtoD"
