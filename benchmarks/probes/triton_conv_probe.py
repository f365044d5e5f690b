"""Can a convolution written in Triton stand in for cuDNN's in ResNet-50, and take the batch-norm statistics
in its epilogue? The Triton route of issue 30, probed with what torch ships: inductor's Triton convolution template.

For each distinct convolution of torchvision's ResNet-50 (v1.5), fp16, NHWC, on one CUDA GPU:
  cudnn        F.conv2d, eager, cuDNN's fastest algorithm (cudnn.benchmark): what inductor calls in rn50's
               compiled step, where convolutions stay aten's.
  cudnn_stats  F.conv2d, then the per-channel sum and sum of squares of its output (what training batch norm
               reads for its statistics), compiled by inductor with its default backends: the conv, then a reduction.
  triton       F.conv2d compiled with max-autotune, the convolution and GEMM backends limited to TRITON (a 1x1
               convolution becomes a matmul): inductor benchmarks its Triton templates' configs, keeps the fastest.
  triton_stats the conv and the statistics compiled together that way. Whether inductor folds the statistics
               into the template's epilogue shows in the kernels it generated, which each row names.
Each row checks triton's output and triton_stats' sums against cudnn's (relative to the largest value).
Times are GPU times (fusion_probe.gpu_ms: the window is queued behind a sleep kernel).

Usage: python3 benchmarks/probes/triton_conv_probe.py --batch 256 > probe.jsonl
       python3 benchmarks/probes/triton_conv_probe.py --dry-run    (CPU: the distinct shapes)
"""
import json
import re

import torch
import torch.nn.functional as F

from fusion_probe import gpu_ms, layers_of, list_layers, probe_each, probe_parser, say

# Inductor lowers a 1x1 stride-1 convolution in channels_last to a matmul, whose backends are the GEMM ones: both
# are limited to Triton, or cuBLAS would run those shapes.
TRITON_ONLY = {"max_autotune": True, "max_autotune_conv_backends": "TRITON", "max_autotune_gemm_backends": "TRITON"}


def conv_stats(x, w, stride: int, pad: int):
    """The conv's output and the two per-channel sums that training batch norm computes from it (fp32)."""
    y = F.conv2d(x, w, None, stride, pad)
    yf = y.float()
    return y, yf.sum((0, 2, 3)), (yf * yf).sum((0, 2, 3))


def kernels(code: str) -> dict:
    """What inductor generated: its Triton kernels by kind (tem: a template, the convolution's or the matmul's that a
    1x1 convolution becomes; red/per: a reduction; poi: pointwise) and the extern kernels it calls instead (aten's
    convolution is cuDNN, its mm cuBLAS)."""
    names = sorted(set(re.findall(r"\btriton_(?:tem|red|per|poi)_\w+", code)))
    kinds = {kind: [n for n in names if n.startswith(f"triton_{kind}_")] for kind in ("tem", "red", "per", "poi")}
    # Calls, not inductor's comments, which name aten.convolution as every kernel's source whatever runs it.
    return dict(kinds, extern=sorted(set(re.findall(r"\bextern_kernels\.(\w+)\(", code))))


def compiled(fn, options):
    """fn compiled on its own: dynamo's cache is cleared first, so no layer's shapes recompile another's."""
    torch._dynamo.reset()
    return torch.compile(fn, options=options, dynamic=False)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-12)).item()


def probe_layer(_cudnn, _handle, layer, args) -> dict:
    from torch._inductor.utils import run_and_get_code

    n, c, h, w_, k, r, s = layer["n"], layer["c"], layer["h"], layer["w"], layer["k"], layer["r"], layer["s"]
    stride, pad = layer["stride"], layer["pad"]
    x = torch.randn(n, c, h, w_, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
    w = (torch.randn(k, c, r, s, device="cuda", dtype=torch.half) / (c * r * s) ** 0.5).to(memory_format=torch.channels_last)
    conv = lambda x, w: F.conv2d(x, w, None, stride, pad)  # noqa: E731
    stats = lambda x, w: conv_stats(x, w, stride, pad)  # noqa: E731
    row = dict(name=layer["name"], count=layer["count"], role=layer["role"], gflop=layer["gflop"], status="ok")

    ref_y, ref_s, ref_sq = conv_stats(x, w, stride, pad)
    row["cudnn_ms"], _ = gpu_ms(lambda: conv(x, w), args.iters, args.warmup)
    cudnn_stats = compiled(stats, {})
    _, code = run_and_get_code(cudnn_stats, x, w)
    row["cudnn_stats_kernels"] = kernels("\n".join(code))
    row["cudnn_stats_ms"], _ = gpu_ms(lambda: cudnn_stats(x, w), args.iters, args.warmup)

    for label, fn in (("triton", conv), ("triton_stats", stats)):
        try:
            triton = compiled(fn, TRITON_ONLY)
            out, code = run_and_get_code(triton, x, w)
        except Exception as e:  # no Triton config fits this shape: recorded, and the row goes on
            row[f"{label}_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            continue
        row[f"{label}_kernels"] = kernels("\n".join(code))
        row[f"{label}_ms"], _ = gpu_ms(lambda: triton(x, w), args.iters, args.warmup)
        y = out if label == "triton" else out[0]
        row[f"{label}_y_rel_err"] = rel_err(y, ref_y)
        if label == "triton_stats":
            row["triton_stats_sum_rel_err"] = max(rel_err(out[1], ref_s), rel_err(out[2], ref_sq))
    if "triton_ms" in row:
        row["triton_over_cudnn"] = round(row["triton_ms"] / row["cudnn_ms"], 3)
    if "triton_stats_ms" in row:
        row["triton_stats_over_cudnn_stats"] = round(row["triton_stats_ms"] / row["cudnn_stats_ms"], 3)
    row["check_ok"] = all(v < 1e-2 for key, v in row.items() if key.endswith("rel_err"))
    return row


def line(row) -> str:
    def ms(key):
        return f"{row[key]:.3f}" if key in row else "-"

    tem = lambda key: len(row.get(key, {}).get("tem", []))  # noqa: E731
    extern = ",".join(row.get("triton_kernels", {}).get("extern", [])) or "none"
    return (f"cudnn {ms('cudnn_ms')}  triton {ms('triton_ms')} ({tem('triton_kernels')} template, extern {extern})  "
            f"cudnn+stats {ms('cudnn_stats_ms')}  triton+stats {ms('triton_stats_ms')} "
            f"(kernels {sum(len(v) for k, v in row.get('triton_stats_kernels', {}).items() if k != 'extern')})  "
            f"check {'ok' if row['check_ok'] else 'FAILED'}"
            + "".join(f"  {k}: {v[:80]}" for k, v in row.items() if k.endswith("_error")))


def summary(rows: list) -> dict:
    """Network totals (each distinct shape times its count) over the rows where every variant ran."""
    full = [r for r in rows if r["status"] == "ok" and "triton_ms" in r and "triton_stats_ms" in r]
    tot = lambda key: round(sum(r[key] * r["count"] for r in full), 3)  # noqa: E731
    out = dict(summary=True, layers=len(full), convs=sum(r["count"] for r in full),
               cudnn_ms=tot("cudnn_ms"), triton_ms=tot("triton_ms"),
               cudnn_stats_ms=tot("cudnn_stats_ms"), triton_stats_ms=tot("triton_stats_ms"),
               # convolutions whose sums inductor put in the template's epilogue: a template, and no reduction after it
               stats_in_template=sum(r["count"] for r in full if r["triton_stats_kernels"]["tem"]
                                     and not r["triton_stats_kernels"]["red"] and not r["triton_stats_kernels"]["per"]),
               outside_triton=[r["name"] for r in full if r["triton_kernels"]["extern"] or not r["triton_kernels"]["tem"]],
               skipped=[r["name"] for r in rows if r not in full])
    return out


def main(argv=None) -> int:
    args = probe_parser(__doc__.split("\n")[0]).parse_args(argv)
    layers = layers_of(args)
    if args.dry_run:
        return list_layers(layers)
    import triton

    torch.backends.cudnn.benchmark = True
    say(json.dumps(dict(torch=torch.__version__, triton=triton.__version__, cudnn=torch.backends.cudnn.version(),
                        gpu=torch.cuda.get_device_name(), batch=args.batch, iters=args.iters, warmup=args.warmup)))
    rows = probe_each(layers, probe_layer, None, None, args, line, say)
    result = summary(rows)
    print(json.dumps(result), flush=True)
    say(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
