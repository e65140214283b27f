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


def with_pdl(on: bool, fn):
    """Run fn() with PDL switched on / off (the switch is read at every launch)."""
    old = os.environ.get("SPECPILOT_PDL")
    os.environ["SPECPILOT_PDL"] = "1" if on else "0"
    try:
        return fn()
    finally:
        if old is None:
            del os.environ["SPECPILOT_PDL"]
        else:
            os.environ["SPECPILOT_PDL"] = old


def timed(fn, n: int) -> float:
    fn(0)
    torch.cuda.synchronize()
    return K.time_calls_us(fn, n)


def ab(run, n: int) -> tuple[float, float, bool]:
    """(us off, us on, outputs equal) of run(i) over ring index i."""
    same = bool(torch.equal(with_pdl(False, lambda: run(0)).view(torch.int16),
                            with_pdl(True, lambda: run(0)).view(torch.int16)))
    return (with_pdl(False, lambda: timed(run, n)), with_pdl(True, lambda: timed(run, n)), same)


def layers(model: str, weights: dict, ring_mb: int, out: dict) -> dict:
    sums = {"cublas": 0.0, "bf16_off": 0.0, "bf16_on": 0.0, "w12_off": 0.0, "w12_on": 0.0}
    for name, N, Kd, count in WB.layer_shapes(model):
        p, xbig = weights[(N, Kd)]
        r12 = K.weight_ring(p, ring_mb << 20)
        r16 = [xbig] + [xbig.clone() for _ in range(len(r12) - 1)]
        acts = [torch.randn(1, Kd, device="cuda").bfloat16() for _ in r12]
        c12 = G.gemv_default_config(1, N, Kd, K._num_sms(acts[0].device))
        t_cub = timed(lambda i: torch.matmul(acts[i], r16[i].t()), len(r12))
        b_off, b_on, b_same = ab(lambda i: G.bf16_gemv(acts[i], r16[i], config=c12), len(r12))
        w_off, w_on, w_same = ab(lambda i: G.w12_gemv(acts[i], r12[i], config=c12), len(r12))
        row = {"model": model, "layer": name, "N": N, "K": Kd, "count": count, "cublas_us": t_cub,
               "bf16_off_us": b_off, "bf16_on_us": b_on, "w12_off_us": w_off, "w12_on_us": w_on,
               "equal": b_same and w_same, "config": c12.short}
        out["layers"].append(row)
        for k, v in (("cublas", t_cub), ("bf16_off", b_off), ("bf16_on", b_on),
                     ("w12_off", w_off), ("w12_on", w_on)):
            sums[k] += v * count / 1000
        print(f"{model:16s} {name[:22]:22s} {N:6d} {Kd:6d} {t_cub:7.1f} {b_off:7.1f} {b_on:7.1f} "
              f"{w_off:7.1f} {w_on:7.1f} {t_cub / w_on:6.2f} {'' if row['equal'] else 'NOT EQUAL'}",
              flush=True)
    return sums


def mlp_chain(model: str, weights: dict, ring_mb: int, out: dict) -> None:
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
    off, on, same = ab(lambda i: run(i, G.w12_gemv, rg, rd), n)
    out["mlp"].append({"model": model, "cublas_us": t_cub, "w12_off_us": off, "w12_on_us": on,
                       "equal": same})
    print(f"{model:16s} MLP chain (norm, gate_up, silu_mul, down): cuBLAS {t_cub:.1f} us, W12 "
          f"GEMV PDL off {off:.1f} us, on {on:.1f} us ({off / on:.3f}x); "
          f"{'equal' if same else 'NOT EQUAL'}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="pdl_bench.json")
    ap.add_argument("--models", default=",".join(WB.MODELS))
    ap.add_argument("--ring-mb", type=int, default=512)
    ap.add_argument("--block-rows", type=int, default=1024)
    args = ap.parse_args()
    if not torch.cuda.is_available() or not pdl.enabled(torch.empty(1, device="cuda")):
        raise SystemExit("needs a CUDA GPU of compute capability >= 9 (and SPECPILOT_PDL != 0)")
    t0 = time.time()
    out = {"env": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__},
           "layers": [], "mlp": [], "sums_ms": {}}
    models = args.models.split(",")
    shapes = [(m, n, N, Kd, c) for m in models for n, N, Kd, c in WB.layer_shapes(m)]
    weights = GB.build_weights(shapes, args.block_rows)
    print(f"weights built in {time.time() - t0:.0f} s\n{'model':16s} {'layer':22s} {'N':>6s} "
          f"{'K':>6s} {'cuBLAS':>7s} {'bf16':>7s} {'bf16P':>7s} {'W12':>7s} {'W12P':>7s} "
          f"{'xcuB':>6s}   (us; P = PDL on; xcuB = cuBLAS / W12P)", flush=True)
    for model in models:
        out["sums_ms"][model] = layers(model, weights, args.ring_mb, out)
    print("\nper token, linear layers (ms):")
    for model, s in out["sums_ms"].items():
        print(f"  {model:16s} cuBLAS {s['cublas']:.2f}  bf16 GEMV {s['bf16_off']:.2f} -> PDL "
              f"{s['bf16_on']:.2f}  W12 GEMV {s['w12_off']:.2f} -> PDL {s['w12_on']:.2f}  "
              f"(W12+PDL x cuBLAS {s['cublas'] / s['w12_on']:.3f})")
    for model in models:
        mlp_chain(model, weights, args.ring_mb, out)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    bad = [r["layer"] for r in out["layers"] + out["mlp"] if not r["equal"]]
    print(f"done in {time.time() - t0:.0f} s; outputs equal with and without PDL: "
          f"{'all' if not bad else 'NOT ' + ', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
