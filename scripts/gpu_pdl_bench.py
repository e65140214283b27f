"""Programmatic dependent launch (specpilot/kernels/pdl.py) on the GPU: the GEMVs with and
without it, side by side (< 2 min).

Run from the repository root on a CUDA machine (sm_90):

    PYTHONPATH=. python scripts/gpu_pdl_bench.py --out /tmp/pdl.json

1. Per linear layer of each model at M = 1 (shapes and weights as in gpu_w12_gemv_bench.py):
   cuBLAS bf16, then the bf16 GEMV and the W12 GEMV at their default configs with PDL off
   ($SPECPILOT_PDL=0) and on; each a CUDA graph of back-to-back calls over a weight ring
   (``kernel.time_calls_us``), so the calls follow each other as the layers of a step do.
2. Per model, the MLP of one decoder layer as the engine runs it (fused residual add + RMSNorm,
   gate_up, SiLU-mul, down), over the ring: cuBLAS, W12 GEMV with PDL off, on.
Every PDL-on output is compared bit for bit with its PDL-off output first (same kernel, same
order of operations: they must be equal). Sums per token weight each layer by its uses.
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

import gpu_w12_bench as WB  # noqa: E402
import gpu_w12_gemv_bench as GB  # noqa: E402
from specpilot.kernels import norm, pdl  # noqa: E402
from specpilot.w12 import gemv as G  # noqa: E402
from specpilot.w12 import kernel as K  # noqa: E402


# (name, PDL on, gemv.PDL_TRIGGER, gemv.PDL_PREFETCH_STEPS); the first is the reference
VARIANTS = [("off", False, 0, 0), ("start+pf2", True, 1, 2), ("start", True, 1, 0),
            ("end", True, 2, 0), ("end+pf2", True, 2, 2), ("wait-only", True, 0, 0)]


def with_variant(v, fn):
    """Run fn() under variant v: $SPECPILOT_PDL (read at every launch) and the GEMV's trigger
    and prefetch settings (constexprs: a new compile per variant)."""
    name, on, trigger, pf = v
    old = (os.environ.get("SPECPILOT_PDL"), G.PDL_TRIGGER, G.PDL_PREFETCH_STEPS)
    os.environ["SPECPILOT_PDL"] = "1" if on else "0"
    G.PDL_TRIGGER, G.PDL_PREFETCH_STEPS = trigger, pf
    try:
        return fn()
    finally:
        if old[0] is None:
            del os.environ["SPECPILOT_PDL"]
        else:
            os.environ["SPECPILOT_PDL"] = old[0]
        G.PDL_TRIGGER, G.PDL_PREFETCH_STEPS = old[1], old[2]


def timed(fn, n: int) -> float:
    fn(0)
    torch.cuda.synchronize()
    return K.time_calls_us(fn, n)


def variants(run, n: int, variants_: list) -> tuple[dict, bool]:
    """({variant: us}, every output equal to the first variant's) of run(i) over ring index i."""
    ref = with_variant(variants_[0], lambda: run(0)).view(torch.int16)
    same = all(torch.equal(with_variant(v, lambda: run(0)).view(torch.int16), ref)
               for v in variants_[1:])
    return {v[0]: with_variant(v, lambda: timed(run, n)) for v in variants_}, same


def layers(model: str, weights: dict, ring_mb: int, vs: list, out: dict) -> dict:
    sums = {"cublas": 0.0, **{v[0]: 0.0 for v in vs}}
    for name, N, Kd, count in WB.layer_shapes(model):
        p, xbig = weights[(N, Kd)]
        r12 = K.weight_ring(p, ring_mb << 20)
        r16 = [xbig] + [xbig.clone() for _ in range(len(r12) - 1)]
        acts = [torch.randn(1, Kd, device="cuda").bfloat16() for _ in r12]
        c12 = G.gemv_default_config(1, N, Kd, K._num_sms(acts[0].device))
        t_cub = timed(lambda i: torch.matmul(acts[i], r16[i].t()), len(r12))
        ts, same = variants(lambda i: G.w12_gemv(acts[i], r12[i], config=c12), len(r12), vs)
        out["layers"].append({"model": model, "layer": name, "N": N, "K": Kd, "count": count,
                              "cublas_us": t_cub, "w12_us": ts, "equal": same,
                              "config": c12.short})
        sums["cublas"] += t_cub * count / 1000
        for k, t in ts.items():
            sums[k] += t * count / 1000
        print(f"{model:16s} {name[:22]:22s} {N:6d} {Kd:6d} {t_cub:7.1f} "
              + " ".join(f"{ts[v[0]]:9.1f}" for v in vs) + ("" if same else "  NOT EQUAL"),
              flush=True)
        torch.cuda.empty_cache()
    return sums


def mlp_chain(model: str, weights: dict, ring_mb: int, vs: list, out: dict) -> None:
    shapes = {name: (N, Kd) for name, N, Kd, _ in WB.layer_shapes(model)}
    gu = next(v for k, v in shapes.items() if "gate_up" in k)
    dn = next(v for k, v in shapes.items() if "down" in k)
    hid, inter = gu[1], gu[0] // 2
    (pg, xg), (pd, xd) = weights[gu], weights[dn]
    rg, rd = K.weight_ring(pg, ring_mb << 20), K.weight_ring(pd, ring_mb << 20)
    n = min(len(rg), len(rd))
    xg16 = [xg] + [xg.clone() for _ in range(n - 1)]
    xd16 = [xd] + [xd.clone() for _ in range(n - 1)]
    gain = torch.rand(hid, device="cuda").bfloat16() + 0.5
    xs = [torch.randn(1, hid, device="cuda").bfloat16() for _ in range(n)]
    res = torch.randn(1, hid, device="cuda").bfloat16()

    def run(i, mm, wg, wd):
        h, _ = norm.rms_norm(xs[i], gain, 1e-6, residual=res)
        y = mm(h, wg[i])
        return mm(norm.silu_mul(y[:, :inter], y[:, inter:]), wd[i])

    t_cub = timed(lambda i: run(i, lambda a, w: torch.matmul(a, w.t()), xg16, xd16), n)
    ts, same = variants(lambda i: run(i, G.w12_gemv, rg, rd), n, vs)
    out["mlp"].append({"model": model, "cublas_us": t_cub, "w12_us": ts, "equal": same})
    print(f"{model:16s} MLP chain (norm, gate_up, silu_mul, down) us: cuBLAS {t_cub:.1f}, W12 "
          + ", ".join(f"{k} {t:.1f}" for k, t in ts.items()) + ("" if same else "; NOT EQUAL"),
          flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="pdl_bench.json")
    ap.add_argument("--models", default=",".join(WB.MODELS))
    ap.add_argument("--ring-mb", type=int, default=512)
    ap.add_argument("--block-rows", type=int, default=1024)
    ap.add_argument("--variants", default=",".join(v[0] for v in VARIANTS),
                    help="names from VARIANTS; the first one given is the reference")
    args = ap.parse_args()
    if not torch.cuda.is_available() or not pdl.enabled(torch.empty(1, device="cuda")):
        raise SystemExit("needs a CUDA GPU of compute capability >= 9 (and SPECPILOT_PDL != 0)")
    t0 = time.time()
    out = {"env": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__},
           "layers": [], "mlp": [], "sums_ms": {}}
    models = args.models.split(",")
    shapes = [(m, n, N, Kd, c) for m in models for n, N, Kd, c in WB.layer_shapes(m)]
    weights = GB.build_weights(shapes, args.block_rows)
    vs = [v for v in VARIANTS if v[0] in args.variants.split(",")]
    print(f"weights built in {time.time() - t0:.0f} s\nW12 GEMV (default config, M = 1) per "
          f"variant, us\n{'model':16s} {'layer':22s} {'N':>6s} {'K':>6s} {'cuBLAS':>7s} "
          + " ".join(f"{v[0]:>9s}" for v in vs), flush=True)
    for model in models:
        out["sums_ms"][model] = layers(model, weights, args.ring_mb, vs, out)
    print("\nper token, linear layers (ms):")
    for model, s in out["sums_ms"].items():
        print(f"  {model:16s} " + "  ".join(f"{k} {t:.2f}" for k, t in s.items()))
    for model in models:
        mlp_chain(model, weights, args.ring_mb, vs, out)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    bad = [r["layer"] for r in out["layers"] + out["mlp"] if not r["equal"]]
    print(f"done in {time.time() - t0:.0f} s; outputs of every variant equal: "
          f"{'all' if not bad else 'NOT ' + ', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
