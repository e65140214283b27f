"""The warp-specialized W12 GEMM (specpilot/w12/ws.py) on an sm_90 GPU: checks, then per layer
and per token against the few-row register loop (mma.py) and cuBLAS (< 4 min).

    PYTHONPATH=. python scripts/gpu_w12_ws_bench.py --m 8,16 --out /tmp/ws.json

1. Checks (one PASS / FAIL line per shape, gpu_w12_gemv_bench's ``check_kernel``): ``ws.w12_ws``
   at each of ``CHECK_CONFIGS`` against fp32 torch on the true weight (escapes included: every
   kind of edge value, a per-row base, a last partial round, N not a multiple of 16) at M = 1, 5,
   8, 9, 16 and (the configs that run 17-32 rows) 17, 32: the same non-finite pattern and a
   relative error (2-norm over the finite outputs) < 5e-3.
2. Timing, every linear layer shape of --models at each --m, us per call as
   ``kernel.time_calls_us`` (a CUDA graph rotating over >= 400 MB of weight copies, median of 5
   replays): cuBLAS bf16, the register loop at MMA_CONFIGS (the best counts; above 16 rows the
   tuned template GEMM instead, what w12_matmul runs there by default) and ws at each candidate
   (the best counts), random N(0, 0.02^2) weights (their natural escapes, ~3e-4).
   Per model: the sums over one token's linear layers (uses per token from the layer table).
   With --ab, the best ws config also on the planes with an empty escape list; with --vary SPEC
   (repeatable; SPEC ``field=value[,field=value]`` of WsConfig, e.g. ``ws_stages=4,ws_tail=1``)
   every ws candidate also with those fields changed (``--vary ws_rows=2,ws_ewarp=1``: the
   32-row blocks of session 49; at 9-16 rows they fit only with ``ws_stages=2``, so add
   ``--vary ws_rows=2,ws_ewarp=1,ws_stages=2``; x resident on all of K, session 52: ``--vary
   ws_xres=1 --vary ws_xres=1,ws_stages=2``); a SPEC with no variant that fits is named
   (variants that are no valid WsConfig, e.g. x resident with the tail split, are left out).
   With --xres also ``ws.xres_candidates`` per layer (x resident, K in the fewest parts that
   fit, and in the fewest with four stages), counted as --vary's variants.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu_w12_bench as WB  # noqa: E402
import gpu_w12_gemv_bench as GB  # noqa: E402
from specpilot.w12 import kernel as K  # noqa: E402
from specpilot.w12 import mma as MM  # noqa: E402
from specpilot.w12 import ws as WS  # noqa: E402
from specpilot.w12.format import encode  # noqa: E402

# the register loop's configs that won layers at M = 8-16 (sessions 36-43)
MMA_CONFIGS = (MM.MmaConfig(2, 1, 2, 8, esc_mma=1), MM.MmaConfig(2, 1, 2, 4, esc_mma=1),
               MM.MmaConfig(2, 1, 2, 8, 136, esc_mma=1), MM.MmaConfig(2, 1, 2, 4, split=2,
                                                                       esc_mma=1))
# every candidate, the tail split (which splits every block of the shapes below 132 of them) with
# and without the escape warp, ws2g128x2 without it and ws4 with it (at 8 rows: ws4 with it does
# not fit at 16); the 32-row blocks (ws_rows 2) with the escape warp, with and without the tail
# split
CHECK_CONFIGS = WS.CANDIDATES + (WS.WsConfig(3, ws_tail=1), WS.WsConfig(4, ws_tail=1),
                                 WS.WsConfig(3, ws_tail=1, ws_ewarp=1), WS.WsConfig(2, 128, 2),
                                 WS.WsConfig(4, ws_ewarp=1)) + WS.CANDIDATES32 + (
                                     WS.WsConfig(2, ws_tail=1, ws_ewarp=1),) + (
                                     WS.CANDIDATES_R2 + (
                                         WS.WsConfig(2, ws_tail=1, ws_ewarp=1, ws_rows=2),
                                         WS.WsConfig(3, ws_tail=1, ws_ewarp=1, ws_rows=2))
                                 ) + WS.CANDIDATES_X + (WS.WsConfig(2, ws_xres=1),
                                                        WS.WsConfig(4, ws_ewarp=1, ws_xres=2),
                                                        WS.WsConfig(4, ws_xres=3))
CHECKS = ((256, 1024, False, WB.ALL_EDGES), (300, 1024, True, WB.FINITE_EDGES),
          (200, 1184, False, WB.ALL_EDGES), (1000, 6656, False, WB.FINITE_EDGES),
          (4096, 5120, False, WB.FINITE_EDGES))


def checks(res: dict) -> bool:
    """gpu_w12_gemv_bench's check_kernel (fp32 torch on the true weight: the same non-finite
    pattern, relative error < 5e-3) per CHECKS shape over every CHECK_CONFIGS entry that fits
    at M."""
    ok_all = True
    for N, Kd, per_row, edges in CHECKS:
        w = WB.make_weight(N, Kd, N + Kd, edges, N * Kd // 500, per_row=per_row).cuda()
        p = K.prepare(encode(w.cpu(), per_row=per_row), "cuda")
        ok_all &= GB.check_kernel(f"N{N} K{Kd} per_row={per_row}", WS.w12_ws, p, w,
                                  CHECK_CONFIGS, (1, 5, 8, 9, 16, 17, 32), skip=lambda cfg, M: (
                                      not WS.fits(cfg, WS.nt_for(M), Kd)
                                      or WS.needs_ewarp(cfg, WS.nt_for(M), True)))
    res["check"] = WB.RESULTS["correctness"]
    return ok_all


def variant(cfg, fields: dict):
    """cfg with fields changed, or None where that is no valid WsConfig."""
    try:
        return replace(cfg, **fields)
    except ValueError:
        return None


def timing(args, res: dict, t0: float) -> None:
    ms = [int(v) for v in args.m.split(",")]
    variants = [{k: int(v) for k, v in (kv.split("=") for kv in spec.split(","))}
                for spec in args.vary]
    dev = torch.device("cuda")
    warned = set()
    print(f"{'model':16s} {'layer':28s} {'N':>6s} {'K':>6s} {'M':>2s} {'cuBLAS':>8s} {'mma':>8s} "
          f"{'ws':>8s} {'ws cfg':>10s} {'ws/mma':>7s} {'cuB/ws':>7s}")
    for model in args.models.split(","):
        for (name, N, Kd, count) in WB.layer_shapes(model):
            if time.time() - t0 > args.time_limit:
                print("time limit: stopping")
                return
            wb = WB.make_weight(256, Kd, 3, WB.FINITE_EDGES, 0)
            wbig, _ = WB.replicate(encode(wb), wb, N)
            p = K.prepare(wbig, "cuda")
            wbf = torch.randn(N, Kd, device="cuda").bfloat16()
            ring = [p] + [K._planes_copy(p) for _ in range(max(2, int(400e6 // (N * Kd * 1.5)))
                                                           - 1)]
            ringb = [wbf] + [wbf.clone() for _ in range(max(2, int(400e6 // (N * Kd * 2))) - 1)]
            for M in ms:
                acts = [torch.randn(M, Kd, device="cuda").bfloat16() for _ in range(4)]
                row = dict(model=model, layer=name, N=N, K=Kd, M=M, count=count)
                acts[0] @ wbf.t()   # cuBLAS's first call outside the timed graph capture (with
                #                     --skip-check it would be inside it and fail)
                row["cublas"] = K.time_calls_us(lambda i: acts[i % 4] @ ringb[i % len(ringb)].t(),
                                                len(ringb))
                base = WS.candidates(M, N, Kd, dev)
                nt = WS.nt_for(M)
                per_spec = [[v for v in (variant(c, f) for c in base)
                             if v is not None and WS.fits(v, nt, Kd)]
                            for f in variants]   # (ws_ewarp's buffer: not ws4 at 16)
                for spec, vs in zip(args.vary, per_spec):   # said once, not silently dropped
                    if not vs and (spec, M, Kd) not in warned:
                        warned.add((spec, M, Kd))
                        print(f"   --vary {spec}: no variant fits at M={M} K={Kd} (e.g. "
                              f"32-row blocks at 9-16 rows fit only with ws_stages=2)")
                if args.xres:
                    per_spec.append(list(WS.xres_candidates(M, N, Kd, dev)))
                wsc = tuple(dict.fromkeys(base + tuple(v for vs in per_spec for v in vs)))
                kinds = (("mma", MMA_CONFIGS), ("ws", wsc))
                if M > MM.MAX_M:   # 17-32 rows: the template GEMM (tuned) in the mma column
                    c = K.get_config("w12", acts[0], p)
                    K.w12_matmul(acts[0], p, config=c)
                    row["mma"] = K.time_calls_us(lambda i: K.w12_matmul(
                        acts[i % 4], ring[i % len(ring)], config=c), len(ring))
                    row["mma_cfg"], kinds = "template", (("ws", wsc),)
                for kind, cands in kinds:
                    for cfg in cands:
                        MM.w12_mma(acts[0], p, cfg)
                        us = K.time_calls_us(lambda i, c=cfg: MM.w12_mma(
                            acts[i % 4], ring[i % len(ring)], c), len(ring))
                        row[f"{kind} {cfg.short}"] = us
                        if us < row.get(kind, 1e30):
                            row[kind], row[f"{kind}_cfg"] = us, cfg.short
                        if cfg in base:   # the best without --vary's variants
                            row["ws_base"] = min(us, row.get("ws_base", 1e30))
                if args.ab and "ws_cfg" in row:   # the best ws config without escapes
                    c = next(c for c in wsc if c.short == row["ws_cfg"])
                    bare = GB.bare_ring(ring)
                    row["ws noesc"] = K.time_calls_us(lambda i: WS.w12_ws(
                        acts[i % 4], bare[i % len(bare)], c), len(bare))
                    print(f"   {row['ws_cfg']} without escapes: {row['ws noesc']:.1f} us")
                res["timing"].append(row)
                wsu = row.get("ws", float("nan"))
                print(f"{model:16s} {name[:28]:28s} {N:6d} {Kd:6d} {M:2d} {row['cublas']:8.1f} "
                      f"{row['mma']:8.1f} {wsu:8.1f} {row.get('ws_cfg', '-'):>10s} "
                      f"{row['mma'] / wsu:7.3f} {row['cublas'] / wsu:7.3f}")
            ring = ringb = None
            torch.cuda.empty_cache()
        for M in ms:
            rows = [r for r in res["timing"] if r["model"] == model and r["M"] == M]
            tot = {k: sum(r[k] * r["count"] for r in rows) for k in ("cublas", "mma")}
            tot["best"] = sum(min(r["mma"], r.get("ws", 1e30)) * r["count"] for r in rows)
            if variants or args.xres:
                tot["best_base"] = sum(min(r["mma"], r.get("ws_base", 1e30)) * r["count"]
                                       for r in rows)
                print(f"{model} M={M} per token without the --vary variants: best of both per "
                      f"layer {tot['best_base']:.0f} us "
                      f"({tot['cublas'] / tot['best_base']:.3f}x of cuBLAS)")
            res["totals"].append(dict(model=model, M=M, layers=len(rows), **tot))
            other = "register loop" if M <= MM.MAX_M else "template GEMM"
            print(f"{model} M={M} per token ({len(rows)} layer shapes): cuBLAS {tot['cublas']:.0f}"
                  f" us, {other} {tot['mma']:.0f} us ({tot['cublas'] / tot['mma']:.3f}x), "
                  f"best of both per layer {tot['best']:.0f} us ({tot['cublas'] / tot['best']:.3f}x"
                  f" of cuBLAS, {tot['mma'] / tot['best']:.3f}x of the {other})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="")
    ap.add_argument("--models", default="qwen38-27b,muse-glimmer-30b")
    ap.add_argument("--m", default="8,16")
    ap.add_argument("--time-limit", type=float, default=240.0)
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--vary", action="append", default=[], metavar="SPEC",
                    help="also every ws candidate with these WsConfig fields changed "
                    "(field=value[,field=value]; repeatable)")
    ap.add_argument("--xres", action="store_true",
                    help="also ws.xres_candidates per layer (x resident), as --vary's variants")
    ap.add_argument("--ab", action="store_true", help="also the best ws config on the planes "
                    "without escapes (timing only: the outputs are wrong)")
    args = ap.parse_args()
    if not WS.supported(8, 1024, torch.device("cuda")):
        print("ws: needs an sm_90 GPU and Triton with Gluon's Hopper ops")
        return 1
    t0 = time.time()
    res = {"check": [], "timing": [], "totals": []}
    ok = True if args.skip_check else checks(res)
    timing(args, res, t0)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    verdict = "skipped" if args.skip_check else "all passed" if ok else "FAILED"
    print(f"checks {verdict}; {time.time() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
