"""Does an L2 prefetch of the next layer's weights, issued after each GEMV, hide the short kernels
between the GEMVs of a decode step? (one H200, ~1-2 min)

    PYTHONPATH=. python scripts/gpu_l2_prefetch_probe.py --target qwen38-27b --configs gemv_m1.json

One token's linear layers of --target in model order, as scripts/gpu_linear_chain.py builds them
(every layer its own weights; the M = 1 winners of a gpu_w12_gemv_bench.py JSON, else tuned here),
with a one-program spin kernel of --gap-us after every layer standing in for the norms, the
recurrence and attention of a decode step (HBM idle meanwhile). Variants, each one CUDA graph,
median of --reps replays, ms per token:

    chain        the layers back to back
    gaps         a gap after every layer
    rows F       gaps, and before each gap ``weight_prefetcher(next weight, "rows", F)``: the
                 first F weights of every row of the next layer in the kernels' K order (W12: F
                 bytes of its L plane and F/2 of H; bf16: 2F bytes)
    head X       gaps, and before each gap the first X MB of the next layer (and the largest X
                 again with --chunk-kb bytes per prefetch instruction)

Reported per variant: ms per token and the share of the gaps' cost it hides, (gaps - v) /
(gaps - chain) ("rows 32" prefetches next to nothing: its deficit is what the extra launches
cost, 2-3 per layer, which a prefetch issued from inside the GEMV kernel would save); the outputs
of every variant equal the chain's bit for bit (checked: a prefetch writes nothing). Kinds
(--kinds): bf16 (our bf16 GEMV), w12 (the W12 GEMV). What the machine does with a prefetch the
kernel that issued it has finished is what this measures: the instruction returns at once, and
the fetch is the memory system's.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu_linear_chain as LC  # noqa: E402  (sequence, configs, layer functions)
import gpu_w12_bench as WB  # noqa: E402  (report / finish)
import gpu_w12_gemv_bench as GB  # noqa: E402  (weights as the GEMV bench builds them)
from specpilot.kernels import prefetch as P  # noqa: E402
from specpilot.w12 import gemv as G  # noqa: E402
from specpilot.w12 import kernel as K  # noqa: E402

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

RESULTS = WB.RESULTS


@triton.jit
def _spin_kernel(out, n, a, b):
    """One program, a chain of n dependent FMAs on values the compiler cannot know (loaded, and
    runtime a, b): time passes, HBM stays idle."""
    offs = tl.arange(0, 32)
    x = tl.load(out + offs)
    for i in range(n):
        x = x * a + b
    tl.store(out + offs, x)


def spin_iters(gap_us: float) -> int:
    """Spin iterations that take ~gap_us inside a graph (calibrated on 200 launches)."""
    out = torch.zeros(32, device="cuda")
    n0 = 2000
    _spin_kernel[(1,)](out, n0, 0.5, 1.0, num_warps=1)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(200):
            _spin_kernel[(1,)](out, n0, 0.5, 1.0, num_warps=1)
    us = K.replay_ms(graph, 5) * 1000 / 200
    return max(1, round(n0 * gap_us / us))


def build_layers(kind: str, seq: list, weights: dict, configs: dict) -> list:
    """[(fn, x, w)] of one token in model order, every layer its own weights."""
    shapes = sorted({(N, Kd) for _, N, Kd in seq})
    counts = {nk: sum(1 for _, N, Kd in seq if (N, Kd) == nk) for nk in shapes}
    xs = {Kd: torch.randn(1, Kd, device="cuda").bfloat16() for _, Kd in shapes}
    fns, per_layer = {}, {}
    for N, Kd in shapes:
        p, xbig = weights[(N, Kd)]
        base = p if kind == "w12" else xbig
        cfg = configs.get((kind, N, Kd)) or G.gemv_autotune(xs[Kd], base, kind == "w12")
        fns[(N, Kd)] = LC.layer_fn(kind, cfg)
        fns[(N, Kd)](xs[Kd], base)   # compile, split-K counters
        per_layer[(N, Kd)] = iter(K.weight_ring(base, 0, min_copies=counts[(N, Kd)],
                                                max_copies=counts[(N, Kd)]))
    return [(fns[(N, Kd)], xs[Kd], next(per_layer[(N, Kd)])) for _, N, Kd in seq]


def run_kind(kind: str, model: str, seq: list, weights: dict, configs: dict, args) -> list:
    layers = build_layers(kind, seq, weights, configs)
    spin_out = torch.zeros(32, device="cuda")
    n_spin = spin_iters(args.gap_us)
    gap = lambda: _spin_kernel[(1,)](spin_out, n_spin, 0.5, 1.0, num_warps=1)  # noqa: E731
    variants = {"chain": None, "gaps": None}
    for f in args.rows:
        variants[f"rows {f}"] = ("rows", f, P.HEAD_CHUNK)
    for mb in args.head_mb:
        variants[f"head {mb:g} MB"] = ("head", int(mb * (1 << 20)), P.HEAD_CHUNK)
    for kb in args.chunk_kb:   # the largest head, other bytes per prefetch instruction
        mb = max(args.head_mb)
        variants[f"head {mb:g} MB/{kb}K"] = ("head", int(mb * (1 << 20)), kb << 10)
    P.weight_prefetcher(layers[0][2], "rows", 64)()   # compile the prefetch kernel once
    torch.cuda.synchronize()
    rows, ref = [], None
    for name, pf in variants.items():
        calls = []
        for i, (fn, x, w) in enumerate(layers):
            calls.append(lambda fn=fn, x=x, w=w: fn(x, w))
            if name == "chain":
                continue
            if pf is not None:
                nxt = layers[(i + 1) % len(layers)][2]   # the last layer prefetches the first
                calls.append(P.weight_prefetcher(nxt, *pf[:2]))
            calls.append(gap)
        chunk = P.HEAD_CHUNK
        P.HEAD_CHUNK = pf[2] if pf is not None else chunk   # read at capture, baked in the graph
        try:
            ms, outs = LC.time_chain(calls, args.reps)
        finally:
            P.HEAD_CHUNK = chunk
        ys = [o for o in outs if isinstance(o, torch.Tensor) and o.dim() == 2]
        if ref is None:
            ref = [y.clone() for y in ys]
        else:
            WB.report(f"{model} {kind} {name}: outputs == chain's, bit for bit",
                      len(ys) == len(ref) and all(torch.equal(a, b) for a, b in zip(ys, ref)))
        rows.append({"model": model, "kind": kind, "variant": name, "ms": ms,
                     "gap_us": args.gap_us, "spin_iters": n_spin})
    chain = rows[0]["ms"]
    gaps = rows[1]["ms"]
    for r in rows:
        r["hidden"] = (gaps - r["ms"]) / (gaps - chain) if gaps > chain else float("nan")
        print(f"{model:16s} {kind:5s} {r['variant']:14s} {r['ms']:8.3f} ms  hides "
              f"{r['hidden']:6.1%} of the gaps' {gaps - chain:.3f} ms", flush=True)
    del layers
    torch.cuda.empty_cache()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="qwen38-27b", help="model_configs name")
    ap.add_argument("--configs", default=None, help="gpu_w12_gemv_bench.py JSON (M = 1 winners)")
    ap.add_argument("--kinds", default="w12,bf16")
    ap.add_argument("--gap-us", type=float, default=5.0, help="spin after every layer (us)")
    ap.add_argument("--rows", default="32,512,1024,2048",
                    help="weights per row prefetched (comma-separated; '' for none; 32: next to "
                         "nothing, the cost of the extra launches alone)")
    ap.add_argument("--head-mb", default="8,16,32",
                    help="MB prefetched from the head of the next layer ('' for none)")
    ap.add_argument("--chunk-kb", default="64",
                    help="the largest --head-mb again with these KB per prefetch instruction "
                         "(default chunk: kernels/prefetch.py HEAD_CHUNK)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--block-rows", type=int, default=1024, help="rows encoded on the CPU per K")
    ap.add_argument("--out", default="l2_prefetch_probe.json")
    args = ap.parse_args()
    args.rows = [int(v) for v in args.rows.split(",") if v]
    args.head_mb = [float(v) for v in args.head_mb.split(",") if v]
    args.chunk_kb = [int(v) for v in args.chunk_kb.split(",") if v] if args.head_mb else []
    kinds = args.kinds.split(",")
    if any(k not in ("w12", "bf16") for k in kinds):
        raise SystemExit("--kinds: w12 and/or bf16")
    if not torch.cuda.is_available() or not K.HAS_TRITON or K.INTERPRET:
        raise SystemExit("needs CUDA and Triton (and TRITON_INTERPRET unset)")
    t0 = time.time()
    seq = LC.sequence(args.target)
    configs = LC.bench_configs(args.configs) if args.configs else {}
    shapes = sorted({(N, Kd) for _, N, Kd in seq})
    weights = GB.build_weights([(args.target, "", N, Kd, 0) for N, Kd in shapes], args.block_rows)
    RESULTS["env"] = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                      "configs": args.configs, "reps": args.reps, "gap_us": args.gap_us}
    for kind in kinds:
        RESULTS["timing"].extend(run_kind(kind, args.target, seq, weights, configs, args))
    return WB.finish(args.out, t0)


if __name__ == "__main__":
    sys.exit(main())
