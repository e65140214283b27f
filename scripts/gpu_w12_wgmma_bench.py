"""The W12 GEMM on Hopper's warpgroup MMA (specpilot/w12/wgmma.py) on an sm_90 GPU: correctness,
then timing against cuBLAS, the Triton W12 GEMM (the engine's kernel above 16 rows) and, at
<= 16 rows, the few-row Gluon kernel (< 10 min).

    PYTHONPATH=. python scripts/gpu_w12_wgmma_bench.py --out /tmp/w12_wgmma.json

1. Correctness (one PASS / FAIL line each): ``wgmma.w12_wgmma`` at every candidate of the shape
   (``wgmma.candidates`` at 64 rows, plus the 128-row ones) against fp32 torch on the decoded
   weights at M = 1, 9, 16, 17, 33, 64, 100, 128: the same non-finite pattern and a relative
   error (2-norm over the finite outputs) < 5e-3. Shapes: gpu_w12_gemv_bench's SWEEP (every
   kind of escape including +-Inf and NaN, a per-row base, a padded K), then every layer shape
   of --models at two configs (random N(0, 0.02^2) weights with planted escapes).
2. Timing, per shape and M (--m, default 16, 32, 64, 128), us per call as
   ``kernel.time_calls_us`` (a CUDA graph of calls rotating over >= --ring-mb of weight copies,
   median of 5 replays): cuBLAS bf16 (``torch.matmul``), W12-TC (the Triton W12 GEMM at its
   default config, or tuned with --tc-tuned), W12-MMA (M <= 16: ``mma.w12_mma`` at its first
   candidate, or tuned with --mma-tuned) and W12-WG at each of ``wgmma.candidates`` (the best
   reported, all in the JSON). With --bf16, also ``wgmma.bf16_wgmma`` (the same loop on the
   bf16 weight, checked first on the layer shapes) at each candidate: W12 over our own bf16
   kernel, the decode's cost. Per model: the sums over one token's linear layers.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu_w12_bench as WB  # noqa: E402
import gpu_w12_gemv_bench as GB  # noqa: E402
from specpilot.w12 import kernel as K  # noqa: E402
from specpilot.w12 import mma as MM  # noqa: E402
from specpilot.w12 import wgmma as WG  # noqa: E402

DEV = "cuda"
RESULTS = WB.RESULTS
CHECK_M = (1, 9, 16, 17, 33, 64, 100, 128)


def configs_for(N: int, Kd: int, n_sm: int) -> list:
    """Every candidate at 64 rows and at 128 rows, once each."""
    out = []
    for M in (64, 128):
        out += [c for c in WG.candidates(M, N, Kd, n_sm) if c not in out]
    return out


def check(tag: str, p, w: torch.Tensor, configs) -> None:
    """``w12_wgmma`` on planes ``p`` (``bf16_wgmma`` on a bf16 weight) at each config (at the M
    it may run) against fp32 torch on the weight ``w``: one PASS / FAIL line."""
    bf16 = torch.is_tensor(p)
    GB.check_kernel(tag, WG.bf16_wgmma if bf16 else WG.w12_wgmma, p, w, configs, CHECK_M,
                    skip=lambda cfg, M: cfg.words * WG.nt_for(M) > WG.MAX_WORDS_NT
                    or WG.smem_bytes(cfg, M) > WG.SMEM_LIMIT)


def sweep(run, acts, ring, cands, n: int) -> dict:
    """{config label: us per call} of ``run(acts[i], ring[i], cfg)`` per candidate; one that
    fails to compile or run is printed and timed as inf (the sweep goes on)."""
    out = {}
    for cfg in cands:
        try:
            out[cfg.short] = GB.timed(lambda i, c=cfg: run(acts[i], ring[i], c), n)
        except Exception as e:  # noqa: BLE001 - one candidate's failure must not end the run
            print(f"  {run.__name__} {cfg.short} M={acts[0].shape[0]}: FAILED {type(e).__name__}: "
                  f"{str(e)[:200]}", flush=True)
            out[cfg.short] = float("inf")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="w12_wgmma_bench.json")
    ap.add_argument("--models", default=",".join(WB.MODELS))
    ap.add_argument("--m", default="16,32,64,128")
    ap.add_argument("--exclude", default="",
                    help="comma-separated substrings: layers whose name has one are not timed")
    ap.add_argument("--ring-mb", type=int, default=512)
    ap.add_argument("--block-rows", type=int, default=1024)
    ap.add_argument("--time-limit", type=float, default=420.0)
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--tc-tuned", action="store_true",
                    help="time the Triton W12 GEMM at its tuned config instead of its default")
    ap.add_argument("--bf16", action="store_true",
                    help="also time bf16_wgmma on the bf16 weights over the candidates")
    ap.add_argument("--mma-tuned", action="store_true",
                    help="at M <= 16 time w12_mma at its tuned config instead of its first "
                         "candidate")
    args = ap.parse_args()
    t0 = time.time()
    if torch.cuda.get_device_capability()[0] != 9:
        print("wgmma needs a compute capability 9.x GPU", file=sys.stderr)
        return 2
    m_values = [int(v) for v in args.m.split(",")]
    n_sm = K._num_sms(torch.device(DEV))
    models, shapes, weights = GB.layer_weights(args.models, args.exclude, args.block_rows)
    print(f"built {len(weights)} weights in {time.time() - t0:.0f} s", flush=True)
    if not args.skip_check:
        for tag, p, x in GB.sweep_planes():
            check(tag, p, x, configs_for(p.N, p.K, n_sm))
        for (N, Kd), (p, xbig) in weights.items():
            check(f"{N}x{Kd}, {p.kent.numel()} escapes", p, xbig,
                  configs_for(N, Kd, n_sm)[:2])
            if args.bf16:
                check(f"{N}x{Kd}", xbig, xbig, configs_for(N, Kd, n_sm)[:2])
        print(f"checks done at {time.time() - t0:.0f} s", flush=True)
    RESULTS["timing"] = []
    print(f"{'model':16s} {'layer':22s} {'N':>6s} {'K':>6s} {'M':>3s} {'cuBLAS':>7s} "
          f"{'W12-TC':>7s} {'MMA':>7s} {'WG':>7s} {'GB/s':>5s} {'x cuBLAS':>8s} {'x TC':>5s} "
          f"config", flush=True)
    order = sorted(weights, key=lambda nk: -nk[0] * nk[1])
    for (N, Kd) in order:
        if time.time() - t0 > args.time_limit:
            print(f"time limit: {N}x{Kd} and later shapes skipped", flush=True)
            break
        p, xbig = weights[(N, Kd)]
        ring12, ring16 = GB.rings(p, xbig, args.ring_mb)
        n = len(ring12)
        wbytes = K.weight_bytes(p)
        for M in m_values:
            acts = [torch.randn(M, Kd, device=DEV).bfloat16() for _ in range(n)]
            t_cub = GB.timed(lambda i: torch.matmul(acts[i], ring16[i].t()), n)
            ctc = K.get_config("w12", acts[0], p, tune=args.tc_tuned)
            t_tc = GB.timed(lambda i: K.w12_matmul(acts[i], ring12[i], config=ctc), n)
            t_mma = float("nan")
            if M <= MM.MAX_M:
                cm = MM.tuned_config(acts[0], p) if args.mma_tuned else MM.CANDIDATES[0]
                t_mma = GB.timed(lambda i: MM.w12_mma(acts[i], ring12[i], cm), n)
            cands = WG.candidates(M, N, Kd, n_sm)
            tried = sweep(WG.w12_wgmma, acts, ring12, cands, n)
            best = min(tried, key=tried.get)
            t_wg = tried[best]
            t_b16, best16, tried16 = float("nan"), "", {}
            if args.bf16:
                tried16 = sweep(WG.bf16_wgmma, acts, ring16, cands, n)
                best16 = min(tried16, key=tried16.get)
                t_b16 = tried16[best16]
            rows = [(m, nm, c) for m, nm, N2, K2, c in shapes if (N2, K2) == (N, Kd)]
            for model, name, count in rows:
                RESULTS["timing"].append({"model": model, "layer": name, "N": N, "K": Kd, "M": M,
                                          "count": count, "cublas_us": t_cub, "w12_tc_us": t_tc,
                                          "w12_tc_config": str(ctc), "w12_mma_us": t_mma,
                                          "w12_wg_us": t_wg, "w12_wg_config": best,
                                          "w12_wg_tried": tried, "bf16_wg_us": t_b16,
                                          "bf16_wg_config": best16, "bf16_wg_tried": tried16})
                print(f"{model:16s} {name[:22]:22s} {N:6d} {Kd:6d} {M:3d} {t_cub:7.1f} "
                      f"{t_tc:7.1f} {t_mma:7.1f} {t_wg:7.1f} {wbytes / t_wg / 1e3:5.0f} "
                      f"{t_cub / t_wg:8.2f} {t_tc / t_wg:5.2f} {best} "
                      + (f"bf16-WG:{t_b16:.1f} ({best16}, x cuBLAS {t_cub / t_b16:.2f}) "
                         if args.bf16 else "")
                      + " ".join(f"{k}:{v:.1f}" for k, v in tried.items()), flush=True)
    print("\nper token (layers weighted by count), ms:")
    for model in models:
        for M in m_values:
            rs = [r for r in RESULTS["timing"] if r["model"] == model and r["M"] == M]
            if not rs:
                continue
            cub = sum(r["cublas_us"] * r["count"] for r in rs) / 1e3
            tc = sum(r["w12_tc_us"] * r["count"] for r in rs) / 1e3
            wg = sum(r["w12_wg_us"] * r["count"] for r in rs) / 1e3
            line = (f"{model:16s} M={M:3d} layers {len(rs)}: cuBLAS {cub:.2f}  W12-TC {tc:.2f}  "
                    f"W12-WG {wg:.2f}  WG x cuBLAS {cub / wg:.3f}  WG x TC {tc / wg:.3f}  "
                    f"worst layer x cuBLAS "
                    f"{min(r['cublas_us'] / r['w12_wg_us'] for r in rs):.2f}")
            if M <= MM.MAX_M:
                mm = sum(r["w12_mma_us"] * r["count"] for r in rs) / 1e3
                line += f"  W12-MMA {mm:.2f} (WG x MMA {mm / wg:.3f})"
            if args.bf16:
                b16 = sum(r["bf16_wg_us"] * r["count"] for r in rs) / 1e3
                line += (f"  bf16-WG {b16:.2f} (x cuBLAS {cub / b16:.3f}; "
                         f"W12-WG x bf16-WG {b16 / wg:.3f})")
            print(line, flush=True)
    return WB.finish(args.out, t0)


if __name__ == "__main__":
    sys.exit(main())
