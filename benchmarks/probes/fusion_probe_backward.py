"""How much of ResNet-50's backward batch-norm traffic cuDNN's Python graph API can remove, per convolution (issue 30).

The backward half of benchmarks/probes/fusion_probe.py. It covers the 32 convolutions whose input is a batch norm's
ReLU output (conv2 and conv3 of each bottleneck: `prologue` in fusion_probe.conv_layers): for each, the backward
of [BN (training) -> ReLU -> conv] given the gradient dY at the conv's output, fp16, NHWC, on one CUDA GPU.
  A, what autograd runs in an eager rn50 step: conv dgrad and wgrad, ReLU backward, BN backward (its two
    per-channel sums and the apply pass), timed as torch.autograd.grad of that chain.
  B, with the fusions cudnn-frontend's Python graph offers:
    1. one graph: conv_dgrad -> relu_backward, the ReLU's input recomputed in the graph as x*scale+bias from the
       BN's raw input x (nothing of the forward's ReLU output is kept) -> dz, written once;
    2. the BN backward from dz in torch (aten.native_batch_norm_backward: the sums and the apply);
    3. one graph: x*scale+bias -> ReLU as the prologue of conv_wgrad -> dW.
The DgradDreluBNBwdWeight pattern that would also fold the BN's sums into step 1 (MLPerf's) is in cuDNN's C++
graph API (dbn_weight) but not in its Python one, so B keeps them in torch.
  C (--dbn), that pattern through benchmarks/probes/cudnn_dbn.cpp, built here as a torch extension:
    1. one graph: conv_dgrad -> relu_backward (the ReLU's input recomputed with fp32 scale and bias) -> dz, and
       dbn_weight over dz and x: dgamma, dbeta and the coefficients of dx;
    2. dx = eq_scale_dy * dz + eq_scale_x * x + eq_bias, one pointwise kernel (torch.compile);
    3. B's graph 3.
The other 21 convolutions (the stem, conv1 and the downsamples: their input is a residual add's ReLU or the
max-pool) and the BNs before a residual add are the same work on both sides and left out. B's dx, dgamma, dbeta
and dW are checked against A's, and so are C's dx, dgamma and dbeta.

Usage: PYTHONPATH=. python3 benchmarks/probes/fusion_probe_backward.py --batch 256 > probe_bwd.jsonl  (needs nvidia-cudnn-frontend)
       PYTHONPATH=. python3 benchmarks/probes/fusion_probe_backward.py --batch 256 --dbn   (and a C++ compiler)
       PYTHONPATH=. python3 benchmarks/probes/fusion_probe_backward.py --dry-run   (CPU: the layers it covers)
"""
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from fusion_probe import (EPS, cudnn_session, fastest_plan, gpu_ms, layers_of, list_layers, probe_each, probe_parser, say,
                          scale_bias)

REL_TOL = 1e-2  # |B-A| / |A| for each gradient, as norms


def batch_stats(x: torch.Tensor):
    """The forward's saved batch statistics of the BN's raw input x: mean and 1/sqrt(biased var + eps), fp32."""
    mean, var = x.float().mean((0, 2, 3)), x.float().var((0, 2, 3), unbiased=False)
    return mean, var, torch.rsqrt(var + EPS)


def masked_dgrad(dy, x, w, scale, bias, stride: int, pad: int):
    """What graph 1 computes, in torch: conv dgrad masked where the recomputed BN output x*scale+bias is > 0."""
    z = x.float() * scale.float() + bias.float()
    dgrad = torch.ops.aten.convolution_backward(dy, torch.relu(z).to(x.dtype), w, None, [stride] * 2, [pad] * 2, [1, 1],
                                                False, [0, 0], 1, [True, False, False])[0]
    return (dgrad * (z > 0)).to(x.dtype)


def bn_backward(dz, x, gamma, mean, invstd):
    """Step 2: the BN's backward from dz (its two per-channel sums and the apply) -> dx, dgamma, dbeta."""
    return torch.ops.aten.native_batch_norm_backward(dz, x, gamma, None, None, mean, invstd, True, EPS,
                                                     [True, True, True])


def dbn_extension(cudnn):
    """benchmarks/probes/cudnn_dbn.cpp built as a torch extension (C++ only, no nvcc), against the headers of the installed
    cudnn-frontend package and the cuDNN and CUDA runtime wheels that torch runs on; cached by torch after the first
    build (about a minute)."""
    from torch.utils.cpp_extension import CUDA_HOME, load

    import nvidia.cu13
    import nvidia.cudnn

    frontend = Path(cudnn.__file__).resolve().parent.parent / "include"  # the wheel's include/, beside the package
    cu13, cudnn_dir = (Path(list(m.__path__)[0]) for m in (nvidia.cu13, nvidia.cudnn))
    # CUDA's headers: the toolkit's where there is one (the runtime wheel lacks crt/), else the wheels' own.
    cuda_include = Path(CUDA_HOME or "/nonexistent") / "include"
    cuda_include = cuda_include if (cuda_include / "crt" / "host_defines.h").exists() else cu13 / "include"
    torch_lib = Path(torch.__file__).parent / "lib"
    libs = [(cudnn_dir / "lib", "libcudnn.so.9"), (cu13 / "lib", "libcudart.so.13"),  # the ones torch runs on
            (cu13 / "lib", "libnvrtc.so.13")]  # cudnn-frontend compiles some of its kernels at run time
    return load(name="rn50_cudnn_dbn", sources=[str(Path(__file__).with_name("cudnn_dbn.cpp"))],
                extra_include_paths=[str(frontend), str(cudnn_dir / "include"), str(cuda_include)],
                extra_cflags=["-O2"],
                extra_ldflags=[f"-L{torch_lib}", "-ltorch_cuda", "-lc10_cuda"]
                + [flag for d, lib in libs for flag in (f"-L{d}", f"-l:{lib}", f"-Wl,-rpath,{d}")])


def graph_of(cudnn, handle, build, bufs: dict, plans: int, dev):
    """A cuDNN graph from build(g) -> {name: tensor}, run by the fastest of its first `plans` plans; returns (run,
    plan name, plans timed, plans cuDNN offers, errors of plans that did not build or run)."""
    d = cudnn.data_type
    g = cudnn.pygraph(io_data_type=d.HALF, intermediate_data_type=d.FLOAT, compute_data_type=d.FLOAT, handle=handle)
    T = build(g, d)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()  # raises cudnnGraphNotSupportedError for a graph no engine runs
    found = fastest_plan(cudnn, handle, g, {T[k]: bufs[k].data_ptr() for k in T}, plans, dev)
    if found[0] is None:
        raise RuntimeError(f"no plan built: {found[4]}")
    return found


def probe_layer(cudnn, handle, layer, args) -> dict:
    dev, half, n, c, k = torch.device("cuda"), torch.float16, layer["n"], layer["c"], layer["k"]
    cl = dict(device=dev, dtype=half, memory_format=torch.channels_last)
    conv = dict(stride=layer["stride"], padding=layer["pad"])
    torch.manual_seed(0)
    x = (torch.randn(n, c, layer["h"], layer["w"], device=dev) * 2 + 0.5).to(**cl)  # the BN's raw input
    w = (torch.randn(k, c, layer["r"], layer["s"], device=dev) * (2 / (c * layer["r"] * layer["s"])) ** 0.5).to(**cl)
    gamma, beta = torch.rand(c, device=dev) + 0.5, torch.randn(c, device=dev) * 0.1
    dy = torch.randn(n, k, layer["p"], layer["q"], device=dev).to(**cl)
    row = {key: layer[key] for key in ("name", "role", "count", "n", "c", "h", "w", "k", "r", "s", "stride", "p", "q")}

    # A: the chain as autograd runs it; leaves that need their gradients, none accumulated (autograd.grad).
    xa, ga, ba, wa = (t.detach().requires_grad_() for t in (x, gamma, beta, w))
    out = F.conv2d(torch.relu(F.batch_norm(xa, None, None, ga, ba, training=True, eps=EPS)), wa, **conv)
    grads_a = torch.autograd.grad(out, (xa, ga, ba, wa), dy, retain_graph=True)
    row["a_ms"], row["a_host_us"] = gpu_ms(lambda: torch.autograd.grad(out, (xa, ga, ba, wa), dy, retain_graph=True),
                                           args.iters, args.warmup)
    row["a_conv_ms"], _ = gpu_ms(lambda: torch.ops.aten.convolution_backward(
        dy, x, w, None, [layer["stride"]] * 2, [layer["pad"]] * 2, [1, 1], False, [0, 0], 1, [True, True, False]),
        args.iters, args.warmup)

    # B: the forward's saved batch statistics, as x*scale+bias for the graphs' recompute.
    mean, var, invstd = batch_stats(x)
    s, b = scale_bias(mean, var, gamma, beta)
    scale, bias = s.view(1, c, 1, 1).to(**cl), b.view(1, c, 1, 1).to(**cl)
    dz, dw = torch.empty_like(x), torch.empty_like(w)
    bufs = dict(DY=dy, W=w, X=x, S=scale, B=bias, DZ=dz, DW=dw)
    spec = lambda g, d, name: g.tensor(name=name, dim=list(bufs[name].shape), stride=list(bufs[name].stride()),  # noqa: E731
                                       data_type=d.HALF)

    def bn_relu_input(g, d, T):  # x*scale+bias: the BN's output, recomputed from its raw input
        for name in ("X", "S", "B"):
            T[name] = spec(g, d, name)
        return g.bias(name="bias", input=g.scale(name="scale", input=T["X"], scale=T["S"]), bias=T["B"])

    def dgrad_drelu(g, d):
        T = {"DY": spec(g, d, "DY"), "W": spec(g, d, "W")}
        dx = g.conv_dgrad(name="dgrad", loss=T["DY"], filter=T["W"], padding=[layer["pad"]] * 2,
                          stride=[layer["stride"]] * 2, dilation=[1, 1])
        dx.set_dim(list(x.shape)).set_stride(list(x.stride()))
        T["DZ"] = g.relu_backward(name="drelu", loss=dx, input=bn_relu_input(g, d, T))
        T["DZ"].set_output(True).set_data_type(d.HALF).set_dim(list(x.shape)).set_stride(list(x.stride()))
        return T

    def sbr_wgrad(g, d):
        T = {"DY": spec(g, d, "DY")}
        T["DW"] = g.conv_wgrad(name="wgrad", image=g.relu(name="relu", input=bn_relu_input(g, d, T)), loss=T["DY"],
                               padding=[layer["pad"]] * 2, stride=[layer["stride"]] * 2, dilation=[1, 1])
        T["DW"].set_output(True).set_data_type(d.HALF).set_dim(list(w.shape)).set_stride(list(w.stride()))
        return T

    t_build = time.perf_counter()
    graphs = {}
    for what, build in (("dgrad_drelu", dgrad_drelu), ("sbr_wgrad", sbr_wgrad)):
        try:
            graphs[what], row[f"{what}_plan"], row[f"{what}_plans_timed"], row[f"{what}_plans_offered"], errors = \
                graph_of(cudnn, handle, build, bufs, args.plans, dev)
            if errors:
                row[f"{what}_plan_errors"] = errors
        except Exception as e:  # cudnnGraphNotSupportedError or a build error: reported, not fatal
            row[f"{what}_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    row["build_s"] = round(time.perf_counter() - t_build, 1)
    if len(graphs) < 2:
        row["status"] = "unsupported"
        return row

    def run_b():
        graphs["dgrad_drelu"]()
        grads = bn_backward(dz, x, gamma, mean, invstd)
        graphs["sbr_wgrad"]()
        return grads

    dx_b, dg_b, db_b = run_b()
    # Relative to the gradient's norm: each is a sum of up to n*p*q fp16 products, and a ReLU input within
    # rounding of 0 may take the other side of the mask in the recompute, so single elements may differ.
    for what, got, ref in (("dx", dx_b, grads_a[0]), ("dgamma", dg_b, grads_a[1]), ("dbeta", db_b, grads_a[2]),
                           ("dw", dw, grads_a[3])):
        got, ref = got.float(), ref.float()
        row[f"{what}_rel_err"] = round(((got - ref).norm() / ref.norm()).item(), 6)
        row[f"{what}_max_abs_err"], row[f"{what}_max_abs"] = round((got - ref).abs().max().item(), 4), round(
            ref.abs().max().item(), 4)
        row[f"{what}_ok"] = row[f"{what}_rel_err"] <= REL_TOL
    row["check_ok"] = all(row[f"{what}_ok"] for what in ("dx", "dgamma", "dbeta", "dw"))
    # Where a difference comes from: graph 1's dz against the same step in torch, and the ReLU inputs whose sign
    # the recompute (fp16 scale and bias) sees otherwise than A's batch norm.
    dz_t = masked_dgrad(dy, x, w, scale, bias, layer["stride"], layer["pad"])
    row["dz_rel_err"] = round(((dz.float() - dz_t.float()).norm() / dz_t.float().norm()).item(), 6)
    z_a = F.batch_norm(x, None, None, gamma, beta, training=True, eps=EPS)
    row["mask_flips"] = int(((x.float() * scale.float() + bias.float() > 0) != (z_a > 0)).sum().item())
    row["b_ms"], row["b_host_us"] = gpu_ms(run_b, args.iters, args.warmup)
    row["b_dgrad_drelu_ms"], _ = gpu_ms(graphs["dgrad_drelu"], args.iters, args.warmup)
    row["b_bn_backward_ms"], _ = gpu_ms(lambda: bn_backward(dz, x, gamma, mean, invstd), args.iters, args.warmup)
    row["b_sbr_wgrad_ms"], _ = gpu_ms(graphs["sbr_wgrad"], args.iters, args.warmup)
    for key in [key for key in row if key.endswith(("_ms", "_us"))]:
        row[key] = round(row[key], 4)
    row["b_over_a"], row["status"] = round(row["b_ms"] / row["a_ms"], 3), "ok"
    if args.dbn:
        try:
            probe_dbn(row, layer, args, dict(dy=dy, w=w, x=x, gamma=gamma, mean=mean, invstd=invstd, s=s, b=b,
                                             z_a=z_a, grads_a=grads_a, wgrad=graphs["sbr_wgrad"]))
        except Exception as e:  # unsupported on this GPU or cuDNN: reported, and B's row stands
            row["c_error"] = f"{type(e).__name__}: {str(e)[-600:]}"  # cuDNN's reason comes last
    return row


def apply_dx(dz, x, eq_dy, eq_x, eq_bias):
    """The BN's dx from dbn_weight's coefficients (C's step 2): compiled, one pointwise kernel."""
    return (dz.float() * eq_dy + x.float() * eq_x + eq_bias).to(dz.dtype)


def probe_dbn(row: dict, layer, args, t: dict) -> None:
    """C: the DgradDreluBNBwdWeight graph (benchmarks/probes/cudnn_dbn.cpp), the dx pass, and B's wgrad graph."""
    c = layer["c"]
    dims = [layer[key] for key in ("n", "c", "h", "w", "k", "r", "s", "p", "q", "stride", "pad")]
    # Which parts of the pattern an engine takes here (cudnn_dbn.cpp's support): "ok" or cuDNN's reason.
    row["c_support"] = {name: DBN.support(v, *dims)[-600:] or "ok" for v, name in enumerate(DBN_VARIANTS)}  # the reason ends it
    if row["c_support"][DBN_VARIANTS[0]] != "ok":  # C's own graph: no engine builds it here, so it is not built again
        row["c_error"] = f"no engine: {row['c_support'][DBN_VARIANTS[0]]}"
        return
    per_channel = lambda v: v.float().reshape(1, c, 1, 1).contiguous()  # noqa: E731
    scale, bias, mean, invstd, gamma = (per_channel(t[k]) for k in ("s", "b", "mean", "invstd", "gamma"))
    t_build = time.perf_counter()
    graph = DBN.DgradDreluDbn(*dims, True)
    row["c_plans_offered"] = graph.plans()
    run_graph = lambda: graph.run(t["dy"], t["w"], t["x"], scale, bias, mean, invstd, gamma)  # noqa: E731
    dz, dgamma, dbeta, eq_dy, eq_x, eq_bias = run_graph()  # the first run picks the fastest plan
    row["c_build_s"] = round(time.perf_counter() - t_build, 1)

    def run_c():
        dz, dgamma, dbeta, eq_dy, eq_x, eq_bias = run_graph()
        dx = APPLY_DX(dz, t["x"], eq_dy, eq_x, eq_bias)
        t["wgrad"]()
        return dx, dgamma, dbeta

    dx, dgamma, dbeta = run_c()
    for what, got, ref in (("dx", dx, t["grads_a"][0]), ("dgamma", dgamma.view(-1), t["grads_a"][1]),
                           ("dbeta", dbeta.view(-1), t["grads_a"][2])):
        got, ref = got.float(), ref.float()
        row[f"c_{what}_rel_err"] = round(((got - ref).norm() / ref.norm()).item(), 6)
    row["c_check_ok"] = all(row[f"c_{what}_rel_err"] <= REL_TOL for what in ("dx", "dgamma", "dbeta"))
    row["c_mask_flips"] = int(((t["x"].float() * scale + bias > 0) != (t["z_a"] > 0)).sum().item())
    row["c_ms"], row["c_host_us"] = gpu_ms(run_c, args.iters, args.warmup)
    row["c_graph_ms"], _ = gpu_ms(run_graph, args.iters, args.warmup)
    row["c_apply_dx_ms"], _ = gpu_ms(lambda: APPLY_DX(dz, t["x"], eq_dy, eq_x, eq_bias), args.iters, args.warmup)
    for key in ("c_ms", "c_host_us", "c_graph_ms", "c_apply_dx_ms"):
        row[key] = round(row[key], 4)
    row["c_over_a"] = round(row["c_ms"] / row["a_ms"], 3)


DBN = APPLY_DX = None  # set by main with --dbn: the built extension and the compiled dx pass
DBN_VARIANTS = ("dgrad_drelu_recompute_dbn", "dgrad_drelu_dbn", "dgrad_dbn", "dbn")  # cudnn_dbn.cpp's support()


def main(argv=None) -> int:
    ap = probe_parser(__doc__.split("\n")[0])
    ap.add_argument("--dbn", action="store_true", help="also C: dbn_weight through benchmarks/probes/cudnn_dbn.cpp")
    args = ap.parse_args(argv)
    layers = layers_of(args, keep=lambda layer: layer["prologue"])
    if args.dry_run:
        return list_layers(layers, "distinct convolutions with a BN+ReLU input")

    cudnn, handle, env = cudnn_session(args)
    if args.dbn:
        global DBN, APPLY_DX
        t0 = time.perf_counter()
        DBN, APPLY_DX = dbn_extension(cudnn), torch.compile(apply_dx, dynamic=False)
        env.update(dbn_extension_build_s=round(time.perf_counter() - t0, 1), dbn_cudnn=DBN.cudnn_version())
    say(json.dumps(env))

    def line(row):
        c = (f"  C {row['c_ms']:.3f} ms (graph {row['c_graph_ms']:.3f}, dx {row['c_apply_dx_ms']:.3f}) C/A "
             f"{row['c_over_a']:.2f} check {'ok' if row['c_check_ok'] else 'FAILED'}" if "c_ms" in row else
             f"  C: {row['c_error'][:120]}" if "c_error" in row else "")
        return (f"A {row['a_ms']:.3f} ms (conv {row['a_conv_ms']:.3f})  B {row['b_ms']:.3f} ms (dgrad+drelu "
                f"{row['b_dgrad_drelu_ms']:.3f}, BN bwd {row['b_bn_backward_ms']:.3f}, wgrad {row['b_sbr_wgrad_ms']:.3f})  "
                f"B/A {row['b_over_a']:.2f}  check {'ok' if row['check_ok'] else 'FAILED'}" + c
                + "".join(f"  {k}:{'ok' if v == 'ok' else 'no'}" for k, v in row.get("c_support", {}).items()))

    rows = probe_each(layers, probe_layer, cudnn, handle, args, line, say)
    ok = [r for r in rows if r["status"] == "ok"]
    def total(rows, key):  # over distinct shapes, each times its count
        return round(sum(r[key] * r["count"] for r in rows), 3)

    tot = lambda key: total(ok, key)  # noqa: E731
    summary = dict(summary=True, **env, layers=len(rows), layers_ok=len(ok), checks_ok=sum(r["check_ok"] for r in ok),
                   convs_covered=sum(r["count"] for r in ok), a_total_ms=tot("a_ms"), b_total_ms=tot("b_ms"),
                   a_conv_total_ms=tot("a_conv_ms"), b_dgrad_drelu_total_ms=tot("b_dgrad_drelu_ms"),
                   b_bn_backward_total_ms=tot("b_bn_backward_ms"), b_sbr_wgrad_total_ms=tot("b_sbr_wgrad_ms"),
                   tolerances=f"|B-A| / |A| <= {REL_TOL} (norms) for dx, dgamma, dbeta and dW")
    summary["saving_ms_per_step"] = round(summary["a_total_ms"] - summary["b_total_ms"], 3)
    with_c = [r for r in ok if "c_ms" in r]
    if args.dbn:  # C over the layers where its graph ran, beside A and B over the same layers
        tot_c = lambda key: total(with_c, key)  # noqa: E731
        summary.update(c_layers=len(with_c), c_checks_ok=sum(r["c_check_ok"] for r in with_c),
                       c_convs=sum(r["count"] for r in with_c), c_a_total_ms=tot_c("a_ms"), c_b_total_ms=tot_c("b_ms"),
                       c_total_ms=tot_c("c_ms"), c_graph_total_ms=tot_c("c_graph_ms"),
                       c_apply_dx_total_ms=tot_c("c_apply_dx_ms"), c_wgrad_total_ms=tot_c("b_sbr_wgrad_ms"),
                       c_saving_ms_per_step=round(tot_c("a_ms") - tot_c("c_ms"), 3))
    print(json.dumps(summary), flush=True)
    say(f"backward of BN->ReLU->conv, {summary['convs_covered']} convs weighted by count: A {summary['a_total_ms']} ms "
        f"(conv alone {summary['a_conv_total_ms']}), B {summary['b_total_ms']} ms, saving {summary['saving_ms_per_step']} "
        f"ms a step; checks ok {summary['checks_ok']}/{len(ok)}")
    if args.dbn:
        say(f"C (dbn_weight) on {summary['c_layers']} layers, {summary['c_convs']} convs: A {summary['c_a_total_ms']} ms, "
            f"B {summary['c_b_total_ms']} ms, C {summary['c_total_ms']} ms (graph {summary['c_graph_total_ms']}, dx "
            f"{summary['c_apply_dx_total_ms']}, wgrad {summary['c_wgrad_total_ms']}); checks ok "
            f"{summary['c_checks_ok']}/{summary['c_layers']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
