"""The Gluon tensor-core W12 GEMM for few rows (specpilot/w12/mma.py) on the GPU: correctness, then
timing against cuBLAS, the Triton W12 GEMM and the W12 GEMV (< 5 min).

    PYTHONPATH=. python scripts/gpu_w12_mma_bench.py --out /tmp/w12_mma.json

1. Correctness (one PASS / FAIL line each): ``mma.w12_mma`` at every config of --configs against
   fp32 torch on the decoded weights, at M = 1, 2, 3, 5, 8, 9, 16: same non-finite pattern and a
   relative error (2-norm over the finite outputs) < 5e-3. Shapes: gpu_w12_gemv_bench's SWEEP
   (every kind of escape including +-Inf and NaN, a per-row base, a padded K) and every layer
   shape of --models (random N(0, 0.02^2) weights with planted escapes, gpu_w12_gemv_bench's
   build_weights).
2. Timing, per shape and M (--m, default 1, 2, 4, 8, 16), us per call as ``kernel.time_calls_us``
   (a CUDA graph of calls rotating over >= --ring-mb of weight copies, median of 5 replays):
   cuBLAS bf16 (``torch.matmul``), W12-TC (the Triton W12 GEMM at its untuned default config, M >
   2 only; tuned at M > 8 with --tc-tuned), W12-GEMV (default config, or tuned with --gemv-tuned;
   M <= 2 only) and W12-MMA at each of --configs or, with --configs tuned, at each of the tuner's
   candidates for the shape (the best is reported, all are in the JSON). Per model: the sums over
   one token's linear layers. With --esc-ab, the best config again on the same planes with an
   empty escape list ("no-esc": timing only, the outputs are wrong), so that the cost of the
   escape prologue shows per layer. With --bf16, also ``mma.bf16_mma`` (the same loop on the bf16
   weight: our fastest bf16 kernel at these M) at each of ``mma.bf16_candidates`` (checked first
   on the layer shapes at M = 1, 8, 16), its sums, and W12-MMA over it.
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
from specpilot.w12 import gemv as G  # noqa: E402
from specpilot.w12 import kernel as K  # noqa: E402
from specpilot.w12 import mma as MM  # noqa: E402

DEV = "cuda"
RESULTS = WB.RESULTS
CHECK_M = (1, 2, 3, 5, 8, 9, 16)


def parse_configs(text: str) -> list:
    out = []
    for item in text.split(","):
        out.append(MM.MmaConfig(*(int(v) for v in item.strip().split("/"))))
    return out


def check(tag: str, p, w: torch.Tensor, configs, m_values) -> None:
    """``p`` (W12 planes: ``w12_mma``; a bf16 weight: ``bf16_mma``) at each config against fp32
    torch on the weight ``w``: one PASS / FAIL line."""
    GB.check_kernel(tag, MM.bf16_mma if torch.is_tensor(p) else MM.w12_mma, p, w, configs,
                    m_values)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="w12_mma_bench.json")
    ap.add_argument("--models", default=",".join(WB.MODELS))
    ap.add_argument("--m", default="1,2,4,8,16")
    ap.add_argument("--configs", default="2/1/1/4,2/1/2/4,2/1/1/8,2/1/2/8,4/1/1/8,4/1/2/8,"
                    "2/1/1/8/128,4/1/1/8/128,2/1/2/8/168",
                    help="warps_k/warps_r/ahead/words[/maxnreg[/split[/esc_pre]]] "
                    "(MmaConfig), "
                    "comma-separated; or 'tuned': per shape the tuner's candidates "
                    "(mma.candidates), which the tuner would pick the fastest of")
    ap.add_argument("--exclude", default="",
                    help="comma-separated substrings: layers whose name has one are not timed")
    ap.add_argument("--ring-mb", type=int, default=512)
    ap.add_argument("--block-rows", type=int, default=1024)
    ap.add_argument("--time-limit", type=float, default=240.0)
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--gemv-tuned", action="store_true",
                    help="at M <= 2 time the W12 GEMV at its tuned config (gemv_autotune over its "
                    "candidates) instead of its default")
    ap.add_argument("--esc-ab", action="store_true",
                    help="also time the best config on planes without escapes (no-esc column)")
    ap.add_argument("--bf16", action="store_true",
                    help="also time bf16_mma on the bf16 weights over its candidates")
    ap.add_argument("--tc-tuned", action="store_true",
                    help="at M > 8 time the Triton W12 GEMM (W12-TC) at its tuned config (the "
                         "engine's kernel for those rows) instead of its default")
    args = ap.parse_args()
    t0 = time.time()
    tuned = args.configs == "tuned"
    configs = [MM.CANDIDATES[0]] if tuned else parse_configs(args.configs)
    m_values = [int(v) for v in args.m.split(",")]
    models, shapes, weights = GB.layer_weights(args.models, args.exclude, args.block_rows)
    print(f"built {len(weights)} weights in {time.time() - t0:.0f} s", flush=True)
    if not args.skip_check:
        for tag, p, x in GB.sweep_planes():
            check(tag, p, x, configs, CHECK_M)
        for (N, Kd), (p, xbig) in weights.items():
            check(f"{N}x{Kd}, {p.kent.numel()} escapes", p, xbig, configs[:2], CHECK_M)
        if args.bf16:
            n_sm = K._num_sms(torch.device(DEV))
            for (N, Kd), (_, xbig) in weights.items():
                check(f"{N}x{Kd}", xbig, xbig, MM.bf16_candidates(N, Kd, n_sm)[:2], (1, 8, 16))
        print(f"checks done at {time.time() - t0:.0f} s", flush=True)
    RESULTS["timing"] = []
    print(f"{'model':16s} {'layer':22s} {'N':>6s} {'K':>6s} {'M':>2s} {'cuBLAS':>7s} {'W12-TC':>7s} "
          f"{'GEMV':>7s} {'MMA':>7s} {'GB/s':>5s} {'x cuBLAS':>8s} config", flush=True)
    order = sorted(weights, key=lambda nk: -nk[0] * nk[1])
    for (N, Kd) in order:
        if time.time() - t0 > args.time_limit:
            print(f"time limit: {N}x{Kd} and later shapes skipped", flush=True)
            break
        p, xbig = weights[(N, Kd)]
        ring12, ring16 = GB.rings(p, xbig, args.ring_mb)
        n = len(ring12)
        wbytes = K.weight_bytes(p)
        n_sm = K._num_sms(torch.device(DEV))
        for M in m_values:
            acts = [torch.randn(M, Kd, device=DEV).bfloat16() for _ in range(n)]
            t_cub = GB.timed(lambda i: torch.matmul(acts[i], ring16[i].t()), n)
            t_tc = t_gemv = float("nan")
            if M > K.GEMV_MAX_M:
                ctc = K.get_config("w12", acts[0], p, tune=args.tc_tuned and M > 8)
                t_tc = GB.timed(lambda i: K.w12_matmul(acts[i], ring12[i], config=ctc), n)
            else:
                cg = (G.gemv_autotune(acts[0], p) if args.gemv_tuned
                      else G.gemv_default_config(M, N, Kd, n_sm))
                t_gemv = GB.timed(lambda i: G.w12_gemv(acts[i], ring12[i], config=cg), n)
            tried = {}
            cands = MM.candidates(N, Kd, n_sm) if tuned else configs
            for cfg in cands:
                tried[cfg.short] = GB.timed(lambda i, c=cfg: MM.w12_mma(acts[i], ring12[i], c), n)
            best = min(tried, key=tried.get)
            t_m = tried[best]
            t_bare = float("nan")
            if args.esc_ab:
                bare = GB.bare_ring(ring12)
                cb = next(c for c in cands if c.short == best)
                t_bare = GB.timed(lambda i: MM.w12_mma(acts[i], bare[i], cb), n)
            t_b16, best16, tried16 = float("nan"), "", {}
            if args.bf16:
                cands16 = MM.bf16_candidates(N, Kd, n_sm)
                for cfg in cands16:
                    tried16[cfg.short] = GB.timed(
                        lambda i, c=cfg: MM.bf16_mma(acts[i], ring16[i], c), n)
                best16 = min(tried16, key=tried16.get)
                t_b16 = tried16[best16]
            rows = [(m, nm, c) for m, nm, N2, K2, c in shapes if (N2, K2) == (N, Kd)]
            for model, name, count in rows:
                RESULTS["timing"].append({"model": model, "layer": name, "N": N, "K": Kd, "M": M,
                                          "count": count, "cublas_us": t_cub, "w12_tc_us": t_tc,
                                          "w12_gemv_us": t_gemv, "w12_mma_us": t_m,
                                          "w12_mma_config": best, "w12_mma_tried": tried,
                                          "w12_mma_no_esc_us": t_bare, "bf16_mma_us": t_b16,
                                          "bf16_mma_config": best16,
                                          "bf16_mma_tried": tried16})
                print(f"{model:16s} {name[:22]:22s} {N:6d} {Kd:6d} {M:2d} {t_cub:7.1f} {t_tc:7.1f} "
                      f"{t_gemv:7.1f} {t_m:7.1f} {wbytes / t_m / 1e3:5.0f} {t_cub / t_m:8.2f} {best} "
                      + (f"no-esc:{t_bare:.1f} " if args.esc_ab else "")
                      + (f"bf16-MMA:{t_b16:.1f} ({best16}, x cuBLAS {t_cub / t_b16:.2f}) "
                         if args.bf16 else "")
                      + " ".join(f"{k}:{v:.1f}" for k, v in tried.items()), flush=True)
    print("\nper token (layers weighted by count), ms:")
    for model in models:
        for M in m_values:
            rs = [r for r in RESULTS["timing"] if r["model"] == model and r["M"] == M]
            if not rs:
                continue
            cub = sum(r["cublas_us"] * r["count"] for r in rs) / 1e3
            mm = sum(r["w12_mma_us"] * r["count"] for r in rs) / 1e3
            print(f"{model:16s} M={M:2d} layers {len(rs)}: cuBLAS {cub:.2f}  W12-MMA {mm:.2f}  "
                  f"x cuBLAS {cub / mm:.3f}  worst layer "
                  f"{min(r['cublas_us'] / r['w12_mma_us'] for r in rs):.2f}", flush=True)
            if args.bf16:
                b16 = sum(r["bf16_mma_us"] * r["count"] for r in rs) / 1e3
                print(f"{model:16s} M={M:2d} bf16: cuBLAS {cub:.2f}  bf16-MMA {b16:.2f}  "
                      f"x cuBLAS {cub / b16:.3f}  W12-MMA x bf16-MMA {b16 / mm:.3f}", flush=True)
    return WB.finish(args.out, t0)


if __name__ == "__main__":
    sys.exit(main())
