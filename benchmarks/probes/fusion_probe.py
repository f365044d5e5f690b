"""How much of ResNet-50's forward batch-norm traffic cuDNN's runtime fusion removes, per convolution (issue 30).

For each distinct convolution of torchvision's ResNet-50 (v1.5), fp16, NHWC, on one CUDA GPU:
  A, what rn50 runs in training: F.conv2d, then F.batch_norm(training=True) (statistics, running statistics
    and the normalized write), then relu_ where the network has a ReLU right after that batch norm.
  B, the MLPerf-style fusion through cuDNN frontend: one graph of [previous BN's scale+bias+ReLU as the
    conv's prologue] -> conv_fprop -> genstats (per-channel sum and sum of squares in the epilogue), then the
    per-channel finalize in torch (mean, var, the next prologue's scale/bias, running statistics), and, where
    no next conv can take this BN's output in its prologue (the stem: a max-pool follows; conv3 and the
    downsample: the residual add follows), one normalize pass (addcmul, and relu_ for the stem).
Each BN is counted once on either side: A applies a BN in its own row, B in the next conv's prologue or in
its own normalize pass, so the network totals compare like with like; a single row's A/B does not (B's
prologue does the previous row's normalize). Work common to both (weight casts, add+ReLU, max-pool) is left out.
B's output y and its mean/var are checked against A's (F.batch_norm with momentum=1 gives the batch mean and
unbiased variance) with the tolerances printed. A graph cuDNN cannot run is reported, not fatal.
Times are GPU times: a sleep kernel holds the GPU while the host queues the whole window, so host overhead
(cudnn-frontend's Python execute, eager launches) is reported apart as host_us, not mixed into ms.
The backward fusions (dgrad+dReLU, wgrad with the prologue applied to its input) are benchmarks/probes/fusion_probe_backward.py.

Usage: PYTHONPATH=. python3 benchmarks/probes/fusion_probe.py --batch 256 > probe.jsonl   (needs nvidia-cudnn-frontend)
       PYTHONPATH=. python3 benchmarks/probes/fusion_probe.py --dry-run    (CPU: the distinct shapes, no cudnn import)
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

EPS, MOMENTUM = 1e-5, 0.1  # torchvision's BatchNorm2d defaults


def role(name: str) -> str:
    """stem, conv1/conv2/conv3 of a bottleneck, or downsample, from the module's name in torchvision."""
    return "stem" if name == "conv1" else "downsample" if ".downsample." in name else name.rsplit(".", 1)[1]


def conv_layers(batch: int = 256, image: int = 224) -> list:
    """The distinct convolutions of resnet50 with how often each occurs, read by forward hooks on the meta device."""
    from torchvision.models import resnet50
    with torch.device("meta"):
        net = resnet50()
    found = []
    hooks = [m.register_forward_hook(lambda m, i, o, name=name: found.append((name, m, i[0].shape, o.shape)))
             for name, m in net.named_modules() if isinstance(m, torch.nn.Conv2d)]
    net(torch.empty(1, 3, image, image, device="meta"))
    for h in hooks:
        h.remove()
    layers = {}
    for name, m, (_, c, h, w), (_, k, p, q) in found:
        r = role(name)
        key = (c, h, w, k, m.kernel_size, m.stride, m.padding, r in ("conv2", "conv3"), r in ("conv1", "conv2"), r)
        row = layers.setdefault(key, dict(
            name=name, modules=[], count=0, n=batch, c=c, h=h, w=w, k=k, r=m.kernel_size[0], s=m.kernel_size[1],
            stride=m.stride[0], pad=m.padding[0], p=p, q=q, role=r,
            prologue=r in ("conv2", "conv3"),  # its input is BN+ReLU of the conv before; conv1/downsample get relu(add)
            absorbed=r in ("conv1", "conv2"),  # its BN+ReLU output feeds only the next conv, whose prologue takes it
            relu_after=r in ("stem", "conv1", "conv2")))  # nn.ReLU right after this BN in torchvision
        row["modules"].append(name)
        row["count"] += 1
    for row in layers.values():
        row["gflop"] = round(2 * batch * row["k"] * row["p"] * row["q"] * row["c"] * row["r"] * row["s"] / 1e9, 3)
    return list(layers.values())


def finalize(s: torch.Tensor, sq: torch.Tensor, count: int):
    """Batch mean and biased variance from genstats' sum and sum of squares (fp32; the variance is clamped at 0
    because E[y^2]-E[y]^2 can cancel to a tiny negative)."""
    mean = s / count
    return mean, (sq / count - mean * mean).clamp_min(0)


def scale_bias(mean, var, gamma, beta, eps: float = EPS):
    """BN training output as y*scale+bias: what the next conv's prologue applies."""
    scale = gamma * torch.rsqrt(var + eps)
    return scale, beta - mean * scale


def gpu_ms(fn, iters: int, warmup: int):
    """(GPU ms per call, host us per call). The window is queued behind a sleep kernel, so events time the GPU
    alone; one synchronize at each edge."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    host_s = (time.perf_counter() - t0) / max(warmup, 1)  # an upper bound of the host's time per call
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(int(min(0.5, 1.5 * host_s * iters + 1e-3) * 2e9))  # ~2e9 cycles a second at most
    start.record()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    host_us = (time.perf_counter() - t0) / iters * 1e6
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters, host_us


def fused_graph(cudnn, handle, x, w, scale, bias, y, stats, layer, prologue: bool):
    """scale+bias+ReLU (if prologue) -> conv_fprop -> genstats as one cuDNN graph; returns (graph, uids)."""
    d = cudnn.data_type
    g = cudnn.pygraph(io_data_type=d.HALF, intermediate_data_type=d.HALF, compute_data_type=d.FLOAT, handle=handle)
    X = g.tensor(name="X", dim=list(x.shape), stride=list(x.stride()), data_type=d.HALF)
    W = g.tensor(name="W", dim=list(w.shape), stride=list(w.stride()), data_type=d.HALF)
    inp, T = X, {"X": X, "W": W}
    if prologue:
        T["S"] = g.tensor(name="S", dim=list(scale.shape), stride=list(scale.stride()), data_type=d.HALF)
        T["B"] = g.tensor(name="B", dim=list(bias.shape), stride=list(bias.stride()), data_type=d.HALF)
        inp = g.relu(name="relu", input=g.bias(name="bias", input=g.scale(name="scale", input=X, scale=T["S"]),
                                              bias=T["B"]))
    T["Y"] = g.conv_fprop(name="conv", image=inp, weight=W, padding=[layer["pad"]] * 2, stride=[layer["stride"]] * 2,
                          dilation=[1, 1])
    T["Y"].set_output(True).set_data_type(d.HALF).set_dim(list(y.shape)).set_stride(list(y.stride()))
    T["SUM"], T["SQ"] = g.genstats(name="genstats", input=T["Y"])
    for t in (T["SUM"], T["SQ"]):  # fp32 sums, one per output channel
        t.set_output(True).set_data_type(d.FLOAT).set_dim(list(stats[0].shape)).set_stride(list(stats[0].stride()))
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()  # raises cudnnGraphNotSupportedError for a graph no engine runs
    bufs = {"X": x, "W": w, "S": scale, "B": bias, "Y": y, "SUM": stats[0], "SQ": stats[1]}
    return g, {T[k]: bufs[k].data_ptr() for k in T}  # raw pointers: as cudnn-frontend's own test does


def fastest_plan(cudnn, handle, g, pack: dict, plans: int, dev):
    """cudnn-frontend's autotune idiom: build the first `plans` of the graph's plans one by one, time each, keep the
    fastest. Returns (run it, its name, plans timed, plans cuDNN offers, errors of those that did not build or run);
    run is None where none did."""
    timed, errors, ws = [], [], torch.empty(0, device=dev, dtype=torch.uint8)
    offered = g.get_execution_plan_count()
    for i in range(min(plans, offered)):
        try:
            g.build_plan_at_index(i)
            size = g.get_workspace_size_plan_at_index(i)
            ws = ws if ws.numel() >= size else torch.empty(size, device=dev, dtype=torch.uint8)
            t, _ = gpu_ms(lambda: g.execute_plan_at_index(pack, ws.data_ptr(), index=i, handle=handle), 5, 2)
        except Exception as e:  # a plan that does not build or run is skipped
            errors.append(f"{i}: {type(e).__name__}: {str(e)[:120]}")
            continue
        timed.append((t, i, g.get_plan_name_at_index(i)))
    if not timed:
        return None, None, 0, offered, errors
    _, best, name = min(timed)
    return (lambda: g.execute_plan_at_index(pack, ws.data_ptr(), index=best, handle=handle)), name, len(timed), offered, errors


def probe_layer(cudnn, handle, layer, args) -> dict:
    dev, half, n = torch.device("cuda"), torch.float16, layer["n"]
    cl = dict(device=dev, dtype=half, memory_format=torch.channels_last)
    torch.manual_seed(0)
    x = torch.randn(n, layer["c"], layer["h"], layer["w"], device=dev).to(**cl)  # a previous raw conv output, or a block input
    w = (torch.randn(layer["k"], layer["c"], layer["r"], layer["s"], device=dev) * (2 / (layer["c"] * layer["r"] * layer["s"])) ** 0.5
         ).to(**cl)
    sc_in = (torch.rand(1, layer["c"], 1, 1, device=dev) * 0.5 + 0.75).to(**cl)  # the previous BN's scale/bias
    bi_in = (torch.randn(1, layer["c"], 1, 1, device=dev) * 0.1).to(**cl)
    gamma, beta = torch.ones(layer["k"], device=dev), torch.zeros(layer["k"], device=dev)
    rm, rv = torch.zeros(layer["k"], device=dev), torch.ones(layer["k"], device=dev)
    xa = torch.relu(x.float() * sc_in.float() + bi_in.float()).to(**cl) if layer["prologue"] else x
    conv = dict(stride=layer["stride"], padding=layer["pad"])
    count = n * layer["p"] * layer["q"]
    row = {k: layer[k] for k in ("name", "role", "count", "n", "c", "h", "w", "k", "r", "s", "stride", "pad", "p", "q",
                             "prologue", "absorbed", "relu_after", "gflop")}

    def run_a():
        z = F.batch_norm(F.conv2d(xa, w, **conv), rm, rv, gamma, beta, training=True, momentum=MOMENTUM, eps=EPS)
        return torch.relu_(z) if layer["relu_after"] else z

    row["a_ms"], row["a_host_us"] = gpu_ms(run_a, args.iters, args.warmup)
    row["a_conv_ms"], _ = gpu_ms(lambda: F.conv2d(xa, w, **conv), args.iters, args.warmup)
    y_a = F.conv2d(xa, w, **conv)
    m_a, v_a = torch.zeros(layer["k"], device=dev), torch.ones(layer["k"], device=dev)
    F.batch_norm(y_a, m_a, v_a, gamma, beta, training=True, momentum=1.0, eps=EPS)  # momentum 1: the batch's own statistics
    v_a = v_a * (count - 1) / count  # running_var is unbiased; genstats gives the biased one

    # stem: 3 channels may be below what a fused engine takes; zero channels change no output (MLPerf pads to 4)
    for c_pad in [layer["c"]] + ([8] if layer["c"] % 8 else []):
        xb, wb = x, w
        if c_pad != layer["c"]:
            xb = F.pad(x, (0, 0, 0, 0, 0, c_pad - layer["c"])).contiguous(memory_format=torch.channels_last)
            wb = F.pad(w, (0, 0, 0, 0, 0, c_pad - layer["c"])).contiguous(memory_format=torch.channels_last)
        y_b = torch.empty_like(y_a)
        stats = torch.zeros(2, 1, layer["k"], 1, 1, device=dev)  # sum, sum of squares: one buffer, one zero_
        t_build = time.perf_counter()
        try:
            g, pack = fused_graph(cudnn, handle, xb, wb, sc_in, bi_in, y_b, stats, layer, layer["prologue"])
            break
        except Exception as e:  # cudnnGraphNotSupportedError, or a build error: reported, not fatal
            if "error" in row:  # the unpadded graph's error, kept beside the padded one's
                row["unpadded_error"] = row["error"]
            row.update(status="unsupported" if isinstance(e, cudnn.cudnnGraphNotSupportedError) else "error",
                       error=f"{type(e).__name__}: {str(e)[:300]}", c_padded=c_pad)
    else:
        return row
    if c_pad != layer["c"]:
        row["unpadded_error"] = row.pop("error")
    row.update(status="ok", c_padded=c_pad if c_pad != layer["c"] else None)

    fused, plan, tried, _, errors = fastest_plan(cudnn, handle, g, pack, args.plans, dev)
    if errors:
        row["plan_errors"] = errors
    if fused is None:
        row.update(status="unsupported", error="no plan built")
        return row
    row["plan"], row["plans_tried"] = plan, tried
    row["build_s"] = round(time.perf_counter() - t_build, 1)  # graph, plans (runtime fusion compiles) and their timing

    stats.zero_()
    fused()
    once = stats.clone()
    fused()  # again without zeroing: does genstats add to what the buffers hold?
    row["genstats_accumulates"] = acc = not torch.allclose(stats, once, rtol=1e-3, atol=1e-3)
    stats.zero_()
    fused()
    m_b, v_b = finalize(stats[0].flatten(), stats[1].flatten(), count)
    tol = dict(y=(1e-2, 1e-2), mean=(1e-3, 1e-2), var=(1e-3, 1e-2))  # (atol, rtol): y, mean, var are O(1)
    for what, b, a in (("y", y_b, y_a), ("mean", m_b, m_a), ("var", v_b, v_a)):
        err = (b.float() - a.float()).abs()
        row[f"{what}_max_abs_err"] = round(err.max().item(), 6)
        row[f"{what}_ok"] = bool((err <= tol[what][0] + tol[what][1] * a.float().abs()).all())
    row["check_ok"] = row["y_ok"] and row["mean_ok"] and row["var_ok"]
    sc_out, bi_out = torch.empty(1, layer["k"], 1, 1, **cl), torch.empty(1, layer["k"], 1, 1, **cl)
    z = torch.empty_like(y_b)

    def fin():  # per channel: statistics, the next prologue's scale/bias, running statistics
        mean, var = finalize(stats[0].flatten(), stats[1].flatten(), count)
        s, b = scale_bias(mean, var, gamma, beta)
        sc_out.view(-1).copy_(s)
        bi_out.view(-1).copy_(b)
        rm.lerp_(mean, MOMENTUM)
        rv.lerp_(var * (count / (count - 1)), MOMENTUM)

    def norm():  # this BN's output where no prologue takes it
        torch.addcmul(bi_out, y_b, sc_out, out=z)
        if layer["relu_after"]:
            torch.relu_(z)

    def run_b():
        if acc:
            stats.zero_()
        fused()
        fin()
        if not layer["absorbed"]:
            norm()

    row["b_ms"], row["b_host_us"] = gpu_ms(run_b, args.iters, args.warmup)
    row["b_fused_ms"], _ = gpu_ms(fused, args.iters, args.warmup)
    row["b_finalize_ms"], _ = gpu_ms(fin, args.iters, args.warmup)
    row["b_over_a"] = round(row["b_ms"] / row["a_ms"], 3)
    for k in ("a_ms", "a_conv_ms", "b_ms", "b_fused_ms", "b_finalize_ms"):
        row[k] = round(row[k], 4)
    row["a_host_us"], row["b_host_us"] = round(row["a_host_us"], 1), round(row["b_host_us"], 1)
    return row


def cudnn_session(args):
    """cudnn-frontend (imported here, so --dry-run runs without it), a handle on torch's current stream, and the
    versions and settings a probe records."""
    import cudnn

    torch.backends.cudnn.benchmark = True  # A gets torch's fastest cuDNN algorithms, as rn50 runs
    handle = cudnn.create_handle()
    cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
    env = dict(torch=torch.__version__, torch_cudnn=torch.backends.cudnn.version(),
               cudnn_backend=cudnn.backend_version_string(), cudnn_frontend=cudnn.__version__,
               gpu=torch.cuda.get_device_name(), batch=args.batch, iters=args.iters, warmup=args.warmup)
    return cudnn, handle, env


def probe_each(layers, probe_layer, cudnn, handle, args, line, say) -> list:
    """probe_layer on each layer: one JSON line each on stdout, and line(row) (or the errors) on stderr."""
    rows = []
    for layer in layers:
        try:
            row = probe_layer(cudnn, handle, layer, args)
        except Exception as e:  # one layer's failure (out of memory, a torch error) does not end the probe
            row = dict(name=layer["name"], count=layer["count"], status="error", error=f"{type(e).__name__}: {str(e)[:300]}")
        rows.append(row)
        print(json.dumps(row), flush=True)
        errors = "; ".join(str(v) for k, v in row.items() if k.endswith("error"))
        say(f"{row['name']:<22} x{row['count']:<2} " + (line(row) if row["status"] == "ok" else f"{row['status'].upper()}: {errors}"))
    return rows


def say(*words) -> None:
    print(*words, file=sys.stderr, flush=True)


def probe_parser(description: str) -> argparse.ArgumentParser:
    """The options every probe takes."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--plans", type=int, default=3, help="cuDNN plans to build and time per graph (the fastest runs)")
    ap.add_argument("--layers", nargs="*", default=[], help="keep layers whose module names contain one of these")
    ap.add_argument("--dry-run", action="store_true", help="list the convolutions it would probe and exit (no GPU)")
    return ap


def layers_of(args, keep=lambda layer: True) -> list:
    """The probe's convolutions at --batch: those keep(layer) takes and, with --layers, whose modules match one."""
    return [layer for layer in conv_layers(args.batch) if keep(layer)
            and (not args.layers or any(t in m for t in args.layers for m in layer["modules"]))]


def list_layers(layers, what: str = "distinct convolutions", describe=None) -> int:
    """--dry-run: each layer as a JSON line on stdout (describe(layer), if given, as a line on stderr), then the count."""
    for layer in layers:
        if describe:
            say(describe(layer))
        print(json.dumps({key: v for key, v in layer.items() if key != "modules"}))
    say(f"{len(layers)} {what}, {sum(layer['count'] for layer in layers)} in all")
    return 0


def main(argv=None) -> int:
    args = probe_parser(__doc__.split("\n")[0]).parse_args(argv)
    layers = layers_of(args)
    if args.dry_run:
        return list_layers(layers, describe=lambda layer: (
            f"{layer['name']:<22} x{layer['count']:<2} {layer['role']:<10} N{layer['n']} C{layer['c']:<4} {layer['h']}x{layer['w']:<4} -> "
            f"K{layer['k']:<4} {layer['r']}x{layer['s']}/{layer['stride']} {layer['p']}x{layer['q']:<4} prologue={layer['prologue']:d} "
            f"absorbed={layer['absorbed']:d} {layer['gflop']} GFLOP"))

    cudnn, handle, env = cudnn_session(args)
    say(json.dumps(env))

    def line(row):
        return (f"A {row['a_ms']:.3f} ms (conv {row['a_conv_ms']:.3f})  B {row['b_ms']:.3f} ms (fused "
                f"{row['b_fused_ms']:.3f}, finalize {row['b_finalize_ms']:.3f})  B/A {row['b_over_a']:.2f}  check "
                f"{'ok' if row['check_ok'] else 'FAILED'} (y err {row['y_max_abs_err']:.2g}, mean "
                f"{row['mean_max_abs_err']:.2g}, var {row['var_max_abs_err']:.2g})")

    rows = probe_each(layers, probe_layer, cudnn, handle, args, line, say)
    ok = [r for r in rows if r["status"] == "ok"]
    tot = lambda k: round(sum(r[k] * r["count"] for r in ok), 3)  # noqa: E731
    summary = dict(
        summary=True, **env, layers=len(rows), layers_ok=len(ok), checks_ok=sum(r["check_ok"] for r in ok),
        convs_covered=sum(r["count"] for r in ok), convs_in_net=sum(layer["count"] for layer in conv_layers(args.batch)),
        a_total_ms=tot("a_ms"), b_total_ms=tot("b_ms"), b_finalize_total_ms=tot("b_finalize_ms"),
        a_conv_total_ms=tot("a_conv_ms"), b_fused_total_ms=tot("b_fused_ms"),
        a_includes="conv2d + F.batch_norm(training) + relu_ where the net has it right after the BN",
        b_includes="fused prologue/conv/genstats graph (+ stats zeroing if genstats accumulates) + finalize "
                   "+ addcmul (and relu_ for the stem) where no next prologue takes the BN output",
        not_measured="backward (fusion_probe_backward.py); weight casts, add+ReLU, max-pool (the same on both sides)",
        tolerances="y, mean, var: |B-A| <= atol + rtol*|A| with (1e-2, 1e-2), (1e-3, 1e-2), (1e-3, 1e-2)")
    summary["saving_ms_per_step"] = round(summary["a_total_ms"] - summary["b_total_ms"], 3)
    summary["saving_without_finalize_ms"] = round(summary["saving_ms_per_step"] + summary["b_finalize_total_ms"], 3)
    print(json.dumps(summary), flush=True)
    say(f"forward, {summary['convs_covered']}/{summary['convs_in_net']} convs weighted by count: A "
        f"{summary['a_total_ms']} ms, B {summary['b_total_ms']} ms (finalize {summary['b_finalize_total_ms']}), "
        f"saving {summary['saving_ms_per_step']} ms a step ({summary['saving_without_finalize_ms']} with a free "
        f"finalize); checks ok {summary['checks_ok']}/{len(ok)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
