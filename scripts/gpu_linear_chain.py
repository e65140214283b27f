"""One decode token's linear layers in model order, each with its own weights, as one CUDA graph,
against the same kernels and configs timed one shape at a time (< 4 min on one H200).

Why: inside `ar`'s graph the cost model times the W12 GEMV layers 2-7% slower (5% summed; the
bf16 GEMV 4%) than gpu_w12_gemv_bench.py times the same configs (docs/benchmarks/w12.md, session
27), which is most of what keeps W12 end to end below 1.2x. The bench replays >= 24 calls of
one shape over a ring of <= 16 weight copies (<= 0.8 GB); a decode step streams every layer's
own weights (38 GB in W12 on Qwen3.8-27B) and runs other kernels in between. This chain keeps
the first difference and drops the second: if it matches the isolated sum, the excess comes from
the kernels between the layers; if it matches the cost model, from the footprint (TLB reach,
DRAM pages) or the order.

    PYTHONPATH=. python scripts/gpu_linear_chain.py --target qwen38-27b --configs gemv_m1.json

--configs: a gpu_w12_gemv_bench.py JSON; its M = 1 winners (W12 and bf16 GEMV) are used, and its
shapes must cover the target's. Without it each shape is tuned here (``gemv_autotune``). Kinds
(--kinds): cublas (``torch.matmul``), bf16 (our bf16 GEMV), w12 (the W12 GEMV). All layers' weights
of one kind are resident at once (Qwen3.8-27B: 51 GB bf16, then 38 GB W12), built from one
encoded block per K (as the bench builds them) and cloned per layer on the GPU. Each layer reads
its own activation row of its K (written once). Reported per kind: the chain's ms per token
(median of --reps replays), the isolated sum (each shape's us per call, timed as the bench
times it, times its count), and their ratio; the chain's outputs after a replay equal an eager
run of it bit for bit (checked). The same layers are also replayed grouped by shape ("by shape":
the same weights and footprint, a kernel switch only where the shape changes), and with
--uniform every W12 layer can run one given config (one compiled kernel for the whole chain):
if model order is slower than both, the switches between kernels cost the difference.
--pdl also replays each GEMV kind's chain with programmatic dependent launch (kernels/pdl.py: a
layer's programs start, and load their first weight tiles, while the layer before it finishes),
same weights and configs, at each GEMV trigger (pdl.GEMV_TRIGGER: the next layer launched at a
layer's start, "<kind> pdl1"; after its main loop, "pdl2"; right after its wait, "pdl3").
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu_w12_bench as WB  # noqa: E402  (layer shapes, weight helpers, report / finish)
import gpu_w12_gemv_bench as GB  # noqa: E402  (weights built as the GEMV bench builds them)
from specpilot.kernels import pdl  # noqa: E402
from specpilot.w12 import gemv as G  # noqa: E402
from specpilot.w12 import kernel as K  # noqa: E402

KINDS = ("cublas", "bf16", "w12")
RESULTS = WB.RESULTS


def sequence(model: str) -> list:
    """[(layer name, N, K)] of one token's linear layers in model order (qkv and gate_up fused, as
    in gpu_w12_bench.layer_shapes, whose counts it reproduces)."""
    shapes = {part: (N, Kd) for name, N, Kd, _ in WB.layer_shapes(model)
              for part in name.split(" / ")}
    with open(os.path.join(WB.CONFIG_DIR, model, "config.json")) as f:
        c = json.load(f)
    n = c["num_hidden_layers"]
    types = c.get("layer_types", ["full_attention"] * n)[:n]
    if "gdn in_proj (qkv,z,b,a)" in shapes:
        mixer = {"full_attention": ["attn qkv (q+gate,k,v)", "attn o_proj"],
                 "linear_attention": ["gdn in_proj (qkv,z,b,a)", "gdn out_proj"]}
    else:
        mixer = {t: ["attn qkv+gate", "attn o_proj"] for t in set(types)}
    seq = [part for t in types for part in mixer[t] + ["mlp gate_up", "mlp down"]] + ["lm_head"]
    out = [(part, *shapes[part]) for part in seq]
    for name, N, Kd, count in WB.layer_shapes(model):
        if sum(1 for _, n2, k2 in out if (n2, k2) == (N, Kd)) != count:
            raise AssertionError(f"{model}: the sequence does not reproduce {name} x{count}")
    return out


def bench_configs(path: str) -> dict:
    """{(kind, N, K): GemvConfig} of the M = 1 winners in a gpu_w12_gemv_bench.py JSON."""
    with open(path) as f:
        rows = json.load(f)["timing"]
    out = {}
    for r in rows:
        if r["M"] != 1:
            continue
        for kind in ("w12", "bf16"):
            cfg = {k: v for k, v in r[f"{kind}_gemv_config"].items() if k != "tuned"}
            out[(kind, r["N"], r["K"])] = G.GemvConfig(**cfg)
    return out


def layer_fn(kind: str, cfg):
    """fn(x, w) -> y of one layer of ``kind`` with a fixed config (cuBLAS: none)."""
    if kind == "cublas":
        return lambda x, w: torch.matmul(x, w.t())
    run = G.w12_gemv if kind == "w12" else G.bf16_gemv
    return lambda x, w: run(x, w, config=cfg)


def time_chain(calls, reps: int) -> tuple:
    """(ms per replay, median of reps, the outputs of the last replay) of a graph of calls."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = [fn() for fn in calls]
    return K.replay_ms(graph, reps), outs


def run_kind(kind: str, model: str, seq: list, weights: dict, configs: dict, args,
             label: str | None = None) -> dict:
    """Chain (model order and sorted by shape) and isolated timings of one kind; frees its
    per-layer weights before returning. ``label`` names the row (default: the kind)."""
    label = label or kind
    dev = "cuda"
    shapes = sorted({(N, Kd) for _, N, Kd in seq})
    counts = {nk: sum(1 for _, N, Kd in seq if (N, Kd) == nk) for nk in shapes}
    xs = {Kd: torch.randn(1, Kd, device=dev).bfloat16() for _, Kd in shapes}
    fns, per_layer, isolated, used = {}, {}, {}, {}
    for N, Kd in shapes:
        p, xbig = weights[(N, Kd)]
        base = p if kind == "w12" else xbig
        cfg = None
        if kind != "cublas":
            cfg = configs.get((kind, N, Kd))
            if cfg is None:
                cfg = G.gemv_autotune(xs[Kd], base, kind == "w12")
        used[(N, Kd)] = cfg
        fns[(N, Kd)] = layer_fn(kind, cfg)
        ring = K.weight_ring(base, args.ring_mb << 20)
        fn = fns[(N, Kd)]
        fn(xs[Kd], base)                  # compile, split-K counters
        torch.cuda.synchronize()
        isolated[(N, Kd)] = K.time_calls_us(lambda i, r=ring, fn=fn, x=xs[Kd]: fn(x, r[i]),
                                            len(ring))
        del ring
        # every layer its own weights (the first one of a shape is the base)
        per_layer[(N, Kd)] = iter(K.weight_ring(base, 0, min_copies=counts[(N, Kd)],
                                                max_copies=counts[(N, Kd)]))
    layers = [(fns[(N, Kd)], xs[Kd], next(per_layer[(N, Kd)])) for _, N, Kd in seq]
    gb = sum(K.weight_bytes(w) if kind == "w12" else w.numel() * 2 for _, _, w in layers) / 1e9
    calls = [lambda fn=fn, x=x, w=w: fn(x, w) for fn, x, w in layers]
    eager = [fn() for fn in calls]
    torch.cuda.synchronize()
    ms, outs = time_chain(calls, args.reps)
    same = all(torch.equal(a, b) for a, b in zip(eager, outs))
    WB.report(f"{model} {label}: graph replay == eager chain, bit for bit", same)
    # the same layers (same weights) grouped by shape: a switch between kernels only where the
    # shape changes, the footprint unchanged
    by_shape = sorted(range(len(seq)), key=lambda i: (seq[i][1], seq[i][2]))
    sorted_ms, _ = time_chain([calls[i] for i in by_shape], args.reps)
    iso_ms = sum(isolated[nk] * counts[nk] for nk in shapes) / 1000
    row = {"model": model, "kind": kind, "label": label, "layers": len(seq), "weight_gb": gb,
           "chain_ms": ms, "sorted_chain_ms": sorted_ms, "isolated_ms": iso_ms,
           "chain_over_isolated": ms / iso_ms, "sorted_over_isolated": sorted_ms / iso_ms,
           "isolated_us": {f"{N}x{Kd}": isolated[(N, Kd)] for N, Kd in shapes},
           "configs": {f"{N}x{Kd}": used[(N, Kd)] and used[(N, Kd)].short for N, Kd in shapes}}
    print(f"{model:16s} {label:26s} {len(seq):4d} layers {gb:5.1f} GB  chain {ms:7.3f} ms  "
          f"by shape {sorted_ms:7.3f}  isolated {iso_ms:7.3f}  chain / isolated "
          f"{ms / iso_ms:5.3f}  by shape / isolated {sorted_ms / iso_ms:5.3f}",
          flush=True)
    del layers, calls, eager, outs, per_layer
    torch.cuda.empty_cache()
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="qwen38-27b", help="model_configs name")
    ap.add_argument("--configs", default=None, help="gpu_w12_gemv_bench.py JSON (M = 1 winners)")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--reps", type=int, default=10, help="timed replays of the chain")
    ap.add_argument("--ring-mb", type=int, default=512,
                    help="weight bytes rotated per isolated timing")
    ap.add_argument("--block-rows", type=int, default=1024, help="rows encoded on the CPU per K")
    ap.add_argument("--uniform", default="",
                    help="comma-separated W12 GEMV config labels (GemvConfig.short): each also "
                         "runs the w12 chain with that one config for every shape")
    ap.add_argument("--pdl", action="store_true",
                    help="also each GEMV chain with programmatic dependent launch")
    ap.add_argument("--out", default="linear_chain.json")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    if any(k not in KINDS for k in kinds):
        raise SystemExit(f"--kinds: each of {', '.join(KINDS)}")
    if not torch.cuda.is_available() or not K.HAS_TRITON or K.INTERPRET:
        raise SystemExit("needs CUDA and Triton (and TRITON_INTERPRET unset)")
    t0 = time.time()
    seq = sequence(args.target)
    configs = bench_configs(args.configs) if args.configs else {}
    shapes = sorted({(N, Kd) for _, N, Kd in seq})
    missing = [nk for nk in shapes for kind in ("w12", "bf16")
               if kind in kinds and (kind, *nk) not in configs]
    if args.configs and missing:
        raise SystemExit(f"{args.configs} has no M = 1 config for {sorted(set(missing))}")
    weights = GB.build_weights([(args.target, "", N, Kd, 0) for N, Kd in shapes], args.block_rows)
    print(f"{args.target}: {len(seq)} linear layers, {len(shapes)} shapes; weights built in "
          f"{time.time() - t0:.0f} s", flush=True)
    RESULTS["env"] = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                      "configs": args.configs, "reps": args.reps, "ring_mb": args.ring_mb}
    uniform = [G.GemvConfig.from_short(u) for u in args.uniform.split(",") if u]
    for kind in kinds:
        RESULTS["timing"].append(run_kind(kind, args.target, seq, weights, configs, args))
        for trigger in (1, 2, 3) if args.pdl and kind != "cublas" else ():
            pdl.ENABLED, old = True, dict(pdl.GEMV_TRIGGER)
            pdl.GEMV_TRIGGER.update({kind: trigger})
            try:
                RESULTS["timing"].append(run_kind(kind, args.target, seq, weights, configs,
                                                  args, label=f"{kind} pdl{trigger}"))
            finally:
                pdl.ENABLED = False
                pdl.GEMV_TRIGGER.update(old)
    for u in uniform:   # one kernel for every layer: no switch between compiled kernels at all
        same = {("w12", N, Kd): u for N, Kd in shapes}
        RESULTS["timing"].append(run_kind("w12", args.target, seq, weights, same, args,
                                          label=f"w12 all {u.short}"))
    return WB.finish(args.out, t0)


if __name__ == "__main__":
    sys.exit(main())
