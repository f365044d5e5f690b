"""profiler=pytorch: the analysis on hand-made events (a real run: tests/e2e/test_profile_run.py)."""

from types import SimpleNamespace

import pytest
from torch.autograd import DeviceType

from rn50.profiling.torch_profile import (KINDS, Span, classify, device_work, host_work, kernel_table, step_window,
                          profile_metrics, union_us)

# Real names: CUDA kernels from an H100 ResNet-50 AMP step, operators from a CPU run.
NAMES = {
    "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x64x64": "conv_gemm",
    "sm90_xmma_wgrad_indexed_implicit_gemm_f16f16_f16f32_f32_nhwc": "conv_gemm",
    "nvjet_sm90_hsh_128x256_64x4_2x1_v_bz_coopA_TNN": "conv_gemm",
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, __half, float, __half>": "conv_gemm",
    "void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_relu_f16_64x64_64x6_nt_align8>(T1::Params)": "conv_gemm",
    "void cudnn::batchnorm_fwtr_nhwc_semiPersist<__half, float, __half, 512, 16, 3, 4, 1, 1, 1, 2>": "batchnorm",
    "void at::vectorized_elementwise_kernel<8, at::float16_copy_kernel_cuda(at::TensorIteratorBase &)>": "elementwise",
    "void at::reduce_kernel<128, 4, at::ReduceOp<c10::Half, at::MeanOps<c10::Half, float>>>": "elementwise",
    "void at::<unnamed>::multi_tensor_apply_kernel<at::<unnamed>::TensorListMetadata<3>, "
    "at::<unnamed>::FusedSgdMathFunctor<float, 3>>": "optimizer",
    "at::amp_update_scale_cuda_kernel(float *, int *, const float *, double, double, int)": "optimizer",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "communication",
    "void at::<unnamed>::max_pool_forward_nhwc<c10::Half, int>": "other",
    "aten::conv2d": "conv_gemm",
    "autograd::engine::evaluate_function: ConvolutionBackward0": "conv_gemm",
    "aten::linear": "conv_gemm",
    "aten::batch_norm": "batchnorm",
    "autograd::engine::evaluate_function: NativeBatchNormBackward0": "batchnorm",
    "aten::relu_": "elementwise",
    "autograd::engine::evaluate_function: ReluBackward0": "elementwise",
    "Optimizer.step#SGD.step": "optimizer",
    "aten::_amp_foreach_non_finite_check_and_unscale_": "optimizer",
    "aten::max_pool2d": "other",
    "autograd::engine::evaluate_function: ToCopyBackward0": "other",
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_kernels_and_operators_fall_in_their_kind(name):
    assert classify(name) == NAMES[name]


def test_union_counts_overlap_once_and_clips_to_the_window():
    spans = [Span("a", 0, 10), Span("b", 5, 15), Span("c", 20, 30), Span("d", 25, 27), Span("e", -5, 2)]
    # [0, 15] (a, b and e's clipped [0, 2]) + [20, 28] (c clipped at 28; d inside c) = 15 + 8
    assert union_us(spans, 0, 28) == 23
    assert union_us([], 0, 28) == 0


def test_busy_share_and_split_of_device_time():
    spans = [Span("sm90_xmma_fprop", 0, 40), Span("cudnn::batchnorm_fwtr", 30, 50),
             Span("vectorized_elementwise_kernel", 60, 70), Span("ncclDevKernel_AllReduce", 65, 95)]
    m = profile_metrics(spans, (0, 200), steps=1)
    # busy: [0, 50] + [60, 95] = 85 of 200 us; time: 40 + 20 + 10 + 30 = 100 us
    assert m["profile/device_busy_pct"] == pytest.approx(42.5)
    assert m["profile/window_ms"] == pytest.approx(0.2)
    assert m["profile/conv_gemm_pct"] == pytest.approx(40)
    assert m["profile/batchnorm_pct"] == pytest.approx(20)
    assert m["profile/elementwise_pct"] == pytest.approx(10)
    assert m["profile/communication_pct"] == pytest.approx(30)
    assert m["profile/optimizer_pct"] == 0 and m["profile/other_pct"] == 0
    assert {f"profile/{k}_pct" for k in KINDS} <= set(m)
    # the all-reduce ran 65-95 us; elementwise hid 65-70 of it: 25 us exposed
    assert m["profile/comm_ms_per_step"] == pytest.approx(0.030)
    assert m["profile/comm_exposed_ms_per_step"] == pytest.approx(0.025)


def test_exposed_communication_is_per_step_and_zero_when_hidden():
    spans = [Span("sm90_xmma_dgrad", 0, 100), Span("ncclDevKernel_AllReduce_Sum_f32", 10, 60),
             Span("sm90_xmma_dgrad", 200, 300), Span("ncclDevKernel_AllReduce_Sum_f32", 290, 340)]
    m = profile_metrics(spans, (0, 400), steps=2)
    assert m["profile/comm_ms_per_step"] == pytest.approx(0.050)
    assert m["profile/comm_exposed_ms_per_step"] == pytest.approx(0.040 / 2)


def test_kernel_table_groups_by_name_most_time_first():
    spans = [Span("aten::add_", 0, 1), Span("aten::conv2d", 1, 5), Span("aten::add_", 5, 7)]
    rows = kernel_table(spans)
    assert [(r["name"], r["calls"], r["category"]) for r in rows] == [
        ("aten::conv2d", 1, "conv_gemm"), ("aten::add_", 2, "elementwise")]
    assert rows[0]["total_ms"] == pytest.approx(0.004) and rows[1]["time_pct"] == pytest.approx(100 * 3 / 7)


def _event(name, start, end, device=DeviceType.CPU, activity="cpu_op", parent=None, is_async=False):
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end), device_type=device,
                           activity_type=activity, cpu_parent=parent, is_async=is_async,
                           is_user_annotation=activity == "user_annotation")


def test_work_and_window_are_picked_from_profiler_events():
    step1 = _event("ProfilerStep*", 10, 60, activity="user_annotation")
    step2 = _event("ProfilerStep*", 60, 110, activity="user_annotation")
    ddp = _event("DistributedDataParallel.forward", 11, 31, activity="user_annotation", parent=step1)
    conv = _event("aten::conv2d", 12, 30, parent=ddp)
    events = [
        step1, step2, ddp, conv,
        _event("aten::convolution", 13, 29, parent=conv),  # nested: counted in its parent
        _event("Optimizer.step#SGD.step", 70, 90, activity="user_annotation", parent=step2),
        _event("autograd::engine::evaluate_function: ReluBackward0", 62, 66),  # the autograd thread's
        _event("async_thing", 0, 200, is_async=True),
        _event("ProfilerStep*", 11, 59, device=DeviceType.CUDA, activity="gpu_user_annotation"),
        _event("sm90_xmma_fprop", 20, 35, device=DeviceType.CUDA, activity="kernel"),
        _event("Memcpy HtoD (Pageable -> Device)", 40, 41, device=DeviceType.CUDA, activity="gpu_memcpy"),
        _event("cudaLaunchKernel", 19, 20, activity="cuda_runtime"),
    ]
    assert step_window(events) == (10, 110)
    assert [s.name for s in device_work(events)] == ["sm90_xmma_fprop", "Memcpy HtoD (Pageable -> Device)"]
    # torch 2.11's events have no activity_type: a device range is told from work by its host twin's name.
    for event in events:
        del event.activity_type
    assert [s.name for s in device_work(events)] == ["sm90_xmma_fprop", "Memcpy HtoD (Pageable -> Device)"]
    assert [s.name for s in host_work(events)] == [
        "aten::conv2d", "Optimizer.step#SGD.step", "autograd::engine::evaluate_function: ReluBackward0",
        "cudaLaunchKernel"]
