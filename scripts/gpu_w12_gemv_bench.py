"""W12 CUDA-core GEMV (specpilot/w12/gemv.py) on the GPU: correctness, then timing (< 4 min).

Run from the repository root on a CUDA machine (needs torch, triton and the repo only):

    PYTHONPATH=. python scripts/gpu_w12_gemv_bench.py --out /tmp/w12_gemv.json

Shapes: the linear layers of the models in specpilot/model_configs (fused qkv / gate_up, lm_head
included), derived from each config.json by ``scripts/gpu_w12_bench.py`` (``layer_shapes``),
whose weight helpers are reused too: one encoded block of --block-rows rows per K (N(0, 0.02^2)
plus injected escapes: subnormals, outliers, -0), replicated to N rows on the GPU.

1. Correctness (one PASS/FAIL line per shape): ``w12_gemv`` and ``bf16_gemv`` at their default
   configs vs fp32 torch on the decoded weights (``decode_w12_gpu``, itself checked bitwise
   against the weights) at every M: same non-finite pattern, relative error (2-norm over the
   finite outputs) < 5e-3, printed next to the floor that bf16 output rounding alone costs.
   Plus small shapes with every kind of escape (+-Inf, NaN), a per-row base and a padded K
   (the sweep of gpu_w12_bench.py). Every config timed later is checked on its shape too (a
   FAIL line is printed if one is wrong).
2. Timing, per shape and M (default 1, 2, 4, 8): each figure is ``kernel.time_calls_us``: a
   CUDA graph of back-to-back calls rotating over a ring of weight copies of >= --ring-mb
   (512 MB, ~10x the L2), median of 5 replays.
   - cuBLAS: ``torch.matmul`` on bf16;
   - W12-TC: the tensor-core ``w12_matmul``, config from ``kernel.get_config`` (autotuned
     while its share of the budget lasts, or tuned earlier: --tc-tune-file), on its own escape
     index of 64-row blocks (``W12Planes.tc``, one range per program of 64 rows); "TC-i16" the
     same config on the GEMV's index of 16-row blocks (four ranges per program; what the GEMM
     read in sessions 27-28 before ``tc``);
   - bf16-GEMV and W12-GEMV: the best of ``gemv_candidates`` (the first --max-cands, most
     promising first), swept while the kind's share of the budget for this M lasts; a row
     whose sweep got no time uses ``gemv_default_config`` and is marked '*'. The winner is
     printed (GemvConfig.short: n<block_n>k<block_k>s<split>w<warps>p<stages>m<block_m><e|r>,
     e = elementwise accumulators, r = per-step reduction).
   - escape epilogue A/B (--esc-ab, on by default): the winning W12 tiling (plain loop) again
     with its escape index read after the loop (esc_pre 0), before it (esc_pre 32 / 64 / 128)
     and in its first K-step (esc_pre 64, esc_late); as it won but on escape indexes of other
     row blocks (IDX_AB; idx64: every program walks its whole 64-row block's escapes, the index
     before session 27; 16-row blocks now; idx8: exact for the 8-row tilings); and on the same
     planes with an empty escape list (the time the kernel would take if escapes cost nothing: a
     floor for esc_pre 0, its output is not checked).
   Reported: us per call, W12-GEMV GB/s (plane and escape bytes read), W12-GEMV / cuBLAS
   (time ratio, > 1 = the GEMV is faster), and per model the sums over one token's linear layers
   (each layer weighted by how often it runs per token), with a "best W12" column taking the
   faster of W12-TC and W12-GEMV per layer.
   --pdl launches the GEMVs with programmatic dependent launch (``kernels/pdl.py``; the GEMV
   triggers of ``pdl.GEMV_TRIGGER``), so each call's first loads (escape entries; the first
   weight tiles with ahead 1 / 2) overlap the previous call's tail as between a decode step's
   layers; cuBLAS and W12-TC are launched as without it.
   --budget (seconds, default 100) bounds all tuning (W12-TC autotune 20%, W12-GEMV sweep 55%,
   bf16-GEMV sweep 25%), split evenly over the M values; shapes are visited largest share of a
   token's time first, so the budget goes where it matters. Compiled kernels are reused across
   shapes, so the first shape of each M pays most of the compile time. Shapes not started
   --time-limit seconds (default 225) after the start are skipped (listed; the sums then lack
   them).
3. ``--out`` JSON: every row (with all configs tried and their times), the sums, the
   environment.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu_w12_bench as WB  # noqa: E402  (layer shapes and weight helpers of the W12 GEMM bench)
from specpilot.kernels import pdl  # noqa: E402
from specpilot.w12 import gemv as G  # noqa: E402
from specpilot.w12 import kernel as K  # noqa: E402
from specpilot.w12.format import bitwise_equal, decode, encode  # noqa: E402

DEV = "cuda"
MODELS = WB.MODELS
M_VALUES = (1, 2, 4, 8)
SHARES = {"tc": 0.20, "w12": 0.55, "bf16": 0.25}   # of the tuning budget, per M
RESULTS = WB.RESULTS  # one results dict: WB.report and WB.finish fill and write it
report = WB.report


def reference(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """fp32 a @ w^T, in row chunks of w (an lm_head in fp32 would take 5 GB at once)."""
    return torch.cat([a.float() @ w[i:i + 32768].float().t() for i in range(0, w.shape[0], 32768)],
                     dim=1)


compare = WB.compare  # (same non-finite pattern, relative error, bf16 rounding floor)


class Budget:
    """Seconds of tuning per (kind, M): SHARES x total / number of M values."""

    def __init__(self, total: float, m_values):
        self.left = {(k, m): total * s / len(m_values) for k, s in SHARES.items() for m in m_values}

    def ok(self, kind: str, M: int) -> bool:
        return self.left[(kind, M)] > 0

    def spend(self, kind: str, M: int, seconds: float) -> None:
        self.left[(kind, M)] -= seconds


# ---------------------------------------------------------------------------------------------
# weights
# ---------------------------------------------------------------------------------------------

def build_weights(shapes, block_rows: int) -> dict:
    """{(N, K): (W12Planes, bf16 weight)} on the GPU, one encoded block per K replicated."""
    blocks: dict = {}
    out: dict = {}
    for _, _, N, Kd, _ in shapes:
        if (N, Kd) in out:
            continue
        if Kd not in blocks:
            bx = WB.make_weight(block_rows, Kd, Kd, WB.FINITE_EDGES, max(1, block_rows * Kd // 20000))
            blocks[Kd] = (encode(bx), bx)
        wbig, xbig = WB.replicate(*blocks[Kd], N)
        out[(N, Kd)] = (K.prepare(wbig, DEV), xbig)
    return out


# ---------------------------------------------------------------------------------------------
# correctness
# ---------------------------------------------------------------------------------------------

SWEEP = [(256, 512, False, WB.ALL_EDGES, 64), (300, 1000, False, WB.FINITE_EDGES, 40),
         (512, 2048, True, WB.FINITE_EDGES, 100), (2048, 5120, False, WB.ALL_EDGES, 400)]


def check_gemv(tag: str, p, w: torch.Tensor, m_values, extra: str = "") -> bool:
    """w12_gemv and bf16_gemv (default configs, passed explicitly: without a config they would
    autotune every shape and M here, unbudgeted, which stalled session 28's M >= 2 sweeps) vs
    fp32 torch on w at every M: one line."""
    worst, floor, pattern = 0.0, 0.0, True
    for M in m_values:
        a = torch.randn(M, w.shape[1], device=DEV).bfloat16()
        ref = reference(a, w)
        cfg = G.gemv_default_config(M, w.shape[0], w.shape[1], K._num_sms(a.device))
        for y in (G.w12_gemv(a, p, config=cfg), G.bf16_gemv(a, w, config=cfg)):
            same, err, fl = compare(y, ref)
            pattern, worst, floor = pattern and same, max(worst, err), max(floor, fl)
    return report(f"gemv vs torch fp32, {tag}", pattern and worst < 5e-3,
                  f"worst rel err {worst:.2e}, bf16 rounding floor {floor:.2e}{extra}")


def check_kernel(tag: str, run, p, w: torch.Tensor, configs, m_values, skip=None) -> bool:
    """``run(a, p, cfg)`` (a GEMM of ours on planes or a bf16 weight ``p``) at each config and
    M of ``m_values`` (but where ``skip(cfg, M)``) against fp32 torch on the weight ``w``: one
    PASS / FAIL line named after ``run``, a line more per failing (M, config)."""
    worst, floor, pattern = 0.0, 0.0, True
    for M in m_values:
        a = torch.randn(M, w.shape[1], device=DEV).bfloat16()
        ref = reference(a, w)
        for cfg in configs:
            if skip is not None and skip(cfg, M):
                continue
            same, err, fl = compare(run(a, p, cfg), ref)
            if not same or err > 5e-3:
                print(f"  {tag} M={M} {cfg.short}: same pattern {same}, rel err {err:.2e}")
            pattern, worst, floor = pattern and same, max(worst, err), max(floor, fl)
    return report(f"{run.__name__} vs torch fp32, {tag}", pattern and worst < 5e-3,
                  f"worst rel err {worst:.2e}, bf16 rounding floor {floor:.2e}")


def sweep_planes():
    """Per SWEEP shape: (tag, W12 planes on the GPU, the bf16 weight on the GPU)."""
    for i, (N, Kd, per_row, edges, n_edges) in enumerate(SWEEP):
        x = WB.make_weight(N, Kd, i, edges, n_edges, per_row)
        w = encode(x, per_row=per_row)
        yield (f"{N}x{Kd}{' per-row' if w.per_row else ''}, {w.n_escapes} escapes",
               K.prepare(w, DEV), x.to(DEV))


def layer_weights(models_csv: str, exclude_csv: str, block_rows: int) -> tuple:
    """(models, shapes, weights) for a bench's --models and --exclude: the layer shapes
    (WB.layer_shapes) of the models whose name has none of the exclude substrings, and
    build_weights over them."""
    models = models_csv.split(",")
    drop = [d for d in exclude_csv.split(",") if d]
    shapes = [(m, n, N, Kd, c) for m in models for n, N, Kd, c in WB.layer_shapes(m)
              if not any(d in n for d in drop)]
    return models, shapes, build_weights(shapes, block_rows)


def correctness(weights: dict, shapes, m_values) -> None:
    for i, (N, Kd, per_row, edges, n_edges) in enumerate(SWEEP):
        x = WB.make_weight(N, Kd, i, edges, n_edges, per_row)
        w = encode(x, per_row=per_row)
        p = K.prepare(w, DEV)
        ok = bitwise_equal(decode(w), x) and bitwise_equal(K.decode_w12_gpu(p).cpu(), x)
        check_gemv(f"{N}x{Kd}{' per-row' if w.per_row else ''}{' decode FAILED' if not ok else ''}",
                   p, x.to(DEV), m_values, f", {w.n_escapes} escapes")
    for (N, Kd), (p, xbig) in weights.items():
        names = " / ".join(sorted({f"{m}:{n}" for m, n, N2, K2, _ in shapes if (N2, K2) == (N, Kd)}))
        dec = K.decode_w12_gpu(p)
        ok = WB.same_bits(dec, xbig)
        check_gemv(f"{N}x{Kd}{'' if ok else ' decode FAILED'}", p, dec, m_values,
                   f", {p.kent.numel()} escapes ({names[:40]})")
        del dec


# ---------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------

def timed(fn, n: int) -> float:
    fn(0)                      # compile, split-K counters; then the graph-replayed timing
    torch.cuda.synchronize()
    return K.time_calls_us(fn, n)


def sweep(kind: str, acts, ring, ref, M: int, N: int, Kd: int, args, budget: Budget):
    """Best (us, config, tuned?, tried list) over the GEMV candidates while the budget lasts;
    every candidate's output is checked against ref first (a wrong one is reported, not
    timed)."""
    run = G.w12_gemv if kind == "w12" else G.bf16_gemv
    cands = G.gemv_candidates(M, N, Kd, K._num_sms(acts[0].device), kind)[:args.max_cands]
    best, tried = None, []
    for cfg in cands:
        if not budget.ok(kind, M):
            break
        t0 = time.time()
        try:
            same, err, _ = compare(run(acts[0], ring[0], config=cfg), ref)
            if not same or err > 5e-3:
                report(f"{kind}_gemv {N}x{Kd} M={M} {cfg.short}", False, f"rel err {err:.2e}")
                continue
            t = timed(lambda i, c=cfg: run(acts[i], ring[i], config=c), len(ring))
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run is skipped
            print(f"  skip {kind} {cfg.short}: {type(e).__name__}: {str(e)[:120]}", flush=True)
            continue
        finally:
            budget.spend(kind, M, time.time() - t0)
        tried.append({"config": cfg.short, "us": t})
        if best is None or t < best[0]:
            best = (t, cfg)
    if best is None:   # no time left (or nothing ran): the default config, marked '*'
        cfg = G.gemv_default_config(M, N, Kd, K._num_sms(acts[0].device))
        return timed(lambda i: run(acts[i], ring[i], config=cfg), len(ring)), cfg, False, tried
    return best[0], best[1], True, tried


def tc_config(a, p, budget: Budget, M: int):
    """(config, tuned?) of the tensor-core W12 GEMM: kernel.get_config, autotuning only while
    the "tc" share of the budget for this M lasts."""
    t0 = time.time()
    cfg = K.get_config("w12", a, p, tune=budget.ok("tc", M))
    budget.spend("tc", M, time.time() - t0)
    return cfg, K._tune_key("w12", M, p.N, p.K, a.device) in K._TUNED


HEADER = (f"{'model':16s} {'layer':24s} {'N':>6s} {'K':>6s} {'M':>2s} {'cuBLAS':>7s} "
          f"{'W12-TC':>8s} {'TC-i16':>7s} {'bf16-GEMV':>10s} {'W12-GEMV':>9s} {'GB/s':>5s} "
          f"{'x cuBLAS':>8s}  "
          f"W12-GEMV config (tried)")


ESC_AB = {"pre0": (0, 0), "pre32": (32, 0), "pre64": (64, 0), "pre128": (128, 0),
          "pre64l": (64, 1)}   # (esc_pre, esc_late) of the escape epilogue A/B
IDX_AB = (64, 8)   # escape index row blocks the winner is also timed on ("idx<rows>")


def idx_ring(ring: list, rows: int) -> list:
    """The ring's planes on an escape index of ``rows``-row blocks, every copy its own index (as
    in K.weight_ring; the copies hold the same weight, so one index fits them all)."""
    first = K.reindex(ring[0], rows)
    return [first] + [dataclasses.replace(first, L=q.L, H=q.H, hb=q.hb, koff=first.koff.clone(),
                                          kent=first.kent.clone(), kval=first.kval.clone())
                      for q in ring[1:]]


def tc_idx16(acts, ring, ref, ctc, N: int, Kd: int, M: int) -> float:
    """us per call of the tensor-core GEMM with config ctc on the GEMV's 16-row escape index
    instead of its own (``W12Planes.tc`` dropped; output checked, NaN if wrong)."""
    ring_i16 = [dataclasses.replace(q, tc=None) for q in ring]
    same, err, _ = compare(K.w12_matmul(acts[0], ring_i16[0], config=ctc), ref)
    if not (same and err <= 5e-3):
        report(f"w12_matmul {N}x{Kd} M={M} on the 16-row index", False, f"rel err {err:.2e}")
        return float("nan")
    return timed(lambda i: K.w12_matmul(acts[i], ring_i16[i], config=ctc), len(ring))


def esc_ab(acts, ring, ref, c12, N: int, Kd: int, M: int) -> dict:
    """{label: us} for the winning W12 config c12 with each variant of ESC_AB (outputs checked),
    as it is on escape indexes of other row blocks (IDX_AB: "idx64" = the index before session
    27) and on planes without escapes ("none"); {} if c12 cannot take esc_pre."""
    if c12.num_stages > 1:
        return {}
    out = {}
    for rows in IDX_AB:
        ring_r = idx_ring(ring, rows)
        first = ring_r[0]
        same, err, _ = compare(G.w12_gemv(acts[0], first, config=c12), ref)
        if same and err <= 5e-3:
            out[f"idx{rows}"] = timed(lambda i: G.w12_gemv(acts[i], ring_r[i], config=c12),
                                      len(ring))
        else:
            report(f"w12_gemv {N}x{Kd} M={M} {c12.short} idx{rows}", False, f"rel err {err:.2e}")
    for label, (pre, late) in ESC_AB.items():
        if late and c12.ahead == 2:   # esc_late loads in the first step, which ahead 2 peels
            continue
        c = dataclasses.replace(c12, esc_pre=pre, esc_late=late)
        same, err, _ = compare(G.w12_gemv(acts[0], ring[0], config=c), ref)
        if not same or err > 5e-3:
            report(f"w12_gemv {N}x{Kd} M={M} {c.short}", False, f"rel err {err:.2e}")
            continue
        out[label] = timed(lambda i, c=c: G.w12_gemv(acts[i], ring[i], config=c), len(ring))
    bare = bare_ring(ring)
    c0 = dataclasses.replace(c12, esc_pre=0, esc_late=0)
    out["none"] = timed(lambda i: G.w12_gemv(acts[i], bare[i], config=c0), len(ring))
    return out


def bare_ring(ring: list) -> list:
    """The ring's planes with an empty escape list (for timing only: the outputs are wrong)."""
    return [K.W12Planes(N=q.N, K=q.K, L=q.L, H=q.H, hb=q.hb, koff=torch.zeros_like(q.koff),
                        kent=q.kent[:0], kval=q.kval[:0]) for q in ring]


def rings(p, xbig: torch.Tensor, ring_mb: int):
    """(W12 ring, bf16 ring): copies of the planes (>= ring_mb MB) and as many of the bf16
    weight."""
    ring12 = K.weight_ring(p, ring_mb << 20)
    return ring12, [xbig] + [xbig.clone() for _ in range(len(ring12) - 1)]


def time_shape(models_rows, N, Kd, p, xbig, m_values, args, budget: Budget) -> None:
    """Time one weight shape at every M; one printed row per (model, layer) using it."""
    ring12, ring16 = rings(p, xbig, args.ring_mb)
    n_ring = len(ring12)
    w12_bytes = K.weight_bytes(p)
    for M in m_values:
        acts = [torch.randn(M, Kd, device=DEV).bfloat16() for _ in range(n_ring)]
        ref = reference(acts[0], xbig)
        t_cub = timed(lambda i: torch.matmul(acts[i], ring16[i].t()), n_ring)
        ctc, tc_ok = tc_config(acts[0], p, budget, M)
        t_tc = timed(lambda i: K.w12_matmul(acts[i], ring12[i], config=ctc), n_ring)
        t_tc16 = tc_idx16(acts, ring12, ref, ctc, N, Kd, M)
        t12, c12, ok12, tried12 = sweep("w12", acts, ring12, ref, M, N, Kd, args, budget)
        t16, c16, ok16, tried16 = sweep("bf16", acts, ring16, ref, M, N, Kd, args, budget)
        ab = esc_ab(acts, ring12, ref, c12, N, Kd, M) if args.esc_ab else {}
        for model, name, count in models_rows:
            row = {"model": model, "layer": name, "N": N, "K": Kd, "M": M, "count": count,
                   "cublas_us": t_cub, "w12_tc_us": t_tc, "w12_tc_idx16_us": t_tc16,
                   "bf16_gemv_us": t16, "w12_gemv_us": t12,
                   "w12_gemv_GBps": w12_bytes / t12 / 1e3, "bf16_cublas_GBps": N * Kd * 2 / t_cub / 1e3,
                   "w12_bytes": w12_bytes, "ring": n_ring,
                   "w12_tc_config": vars(ctc) | {"tuned": tc_ok},
                   "w12_gemv_config": vars(c12) | {"tuned": ok12}, "w12_gemv_tried": tried12,
                   "bf16_gemv_config": vars(c16) | {"tuned": ok16}, "bf16_gemv_tried": tried16,
                   "esc_ab": ab}
            RESULTS["timing"].append(row)
            print(f"{model:16s} {name[:24]:24s} {N:6d} {Kd:6d} {M:2d} {t_cub:7.1f} "
                  f"{t_tc:7.1f}{' ' if tc_ok else '*'} {t_tc16:7.1f} "
                  f"{t16:9.1f}{' ' if ok16 else '*'} "
                  f"{t12:8.1f}{' ' if ok12 else '*'} {row['w12_gemv_GBps']:5.0f} "
                  f"{t_cub / t12:8.2f}  {c12.short} ({len(tried12)})", flush=True)


def esc_table() -> None:
    """The escape epilogue A/B, one line per shape and M (us; share = (pre0 - none) / pre0)."""
    rows = {(r["N"], r["K"], r["M"]): r for r in RESULTS["timing"] if r.get("esc_ab")}
    if not rows:
        return
    print(f"\nescape epilogue A/B (us): {'N x K':>14s} {'M':>2s} {'config':22s} "
          + " ".join(f"{label:>7s}" for label in ESC_AB)
          + "".join(f" {f'idx{rows}':>7s}" for rows in IDX_AB) + f" {'none':>7s} {'share':>6s}")
    for (N, Kd, M), r in rows.items():
        ab = r["esc_ab"]
        cols = " ".join(f"{ab[label]:7.1f}" if label in ab else f"{'-':>7s}" for label in ESC_AB)
        share = (ab["pre0"] - ab["none"]) / ab["pre0"] if "pre0" in ab else float("nan")
        c = G.GemvConfig(**{k: v for k, v in r["w12_gemv_config"].items() if k != "tuned"})
        idx = "".join(f" {ab[f'idx{rows}']:7.1f}" if f"idx{rows}" in ab else f" {'-':>7s}"
                      for rows in IDX_AB)
        print(f"{'':26s}{f'{N}x{Kd}':>14s} {M:2d} {c.short:22s} {cols}{idx} {ab['none']:7.1f} "
              f"{share:6.1%}", flush=True)


def model_totals(models, m_values) -> None:
    print(f"\n{'per token, linear layers':24s} {'M':>2s} {'cuBLAS ms':>9s} {'W12-TC ms':>9s} "
          f"{'bf16-GEMV':>9s} {'W12-GEMV':>9s} {'GEMV x cuBLAS':>13s} {'TC x cuBLAS':>11s} "
          f"{'best W12 x cuBLAS':>17s}")
    for model in models:
        for M in m_values:
            rows = [r for r in RESULTS["timing"] if r["model"] == model and r["M"] == M]
            if not rows:
                continue
            tot = {k: sum(r[k] * r["count"] for r in rows) / 1000
                   for k in ("cublas_us", "w12_tc_us", "bf16_gemv_us", "w12_gemv_us")}
            best = sum(min(r["w12_tc_us"], r["w12_gemv_us"]) * r["count"] for r in rows) / 1000
            RESULTS["model_totals"].append({"model": model, "M": M, "best_w12_ms": best,
                                            **{k.replace("_us", "_ms"): v for k, v in tot.items()}})
            print(f"{model:24s} {M:2d} {tot['cublas_us']:9.2f} {tot['w12_tc_us']:9.2f} "
                  f"{tot['bf16_gemv_us']:9.2f} {tot['w12_gemv_us']:9.2f} "
                  f"{tot['cublas_us'] / tot['w12_gemv_us']:13.2f} "
                  f"{tot['cublas_us'] / tot['w12_tc_us']:11.2f} {tot['cublas_us'] / best:17.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="w12_gemv_bench.json", help="JSON file for all results")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--m", default=",".join(map(str, M_VALUES)), help="activation rows (<= 8)")
    ap.add_argument("--budget", type=float, default=100.0,
                    help="seconds of tuning in all (W12-TC autotune, GEMV candidate sweeps)")
    ap.add_argument("--max-cands", type=int, default=12, help="GEMV candidates swept per shape")
    ap.add_argument("--ring-mb", type=int, default=512, help="weight bytes rotated per timing")
    ap.add_argument("--block-rows", type=int, default=1024, help="rows encoded on the CPU per K")
    ap.add_argument("--time-limit", type=float, default=225.0,
                    help="seconds after the start at which shapes not yet timed are skipped")
    ap.add_argument("--esc-ab", action=argparse.BooleanOptionalAction, default=True,
                    help="time the winning W12 tiling with each esc_pre and without escapes")
    ap.add_argument("--pdl", action="store_true",
                    help="launch the GEMVs with programmatic dependent launch (kernels/pdl.py, "
                         "triggers as pdl.GEMV_TRIGGER): back-to-back calls then overlap as the "
                         "layers of a decode step do (cuBLAS and W12-TC unchanged)")
    ap.add_argument("--tc-tune-file", default=None,
                    help="W12-TC configs tuned earlier (gpu_w12_bench.py --save-tuning): loaded "
                         "first, so the tensor-core GEMM is timed tuned without spending budget")
    args = ap.parse_args()
    m_values = tuple(int(m) for m in args.m.split(","))
    if not all(G.gemv_supported(m) for m in m_values):
        raise SystemExit(f"--m: the GEMV takes 1..{G.MAX_M} rows")
    if not torch.cuda.is_available() or not K.HAS_TRITON or K.INTERPRET:
        raise SystemExit("needs CUDA and Triton (and TRITON_INTERPRET unset)")
    os.environ.pop("SPECPILOT_W12_TUNE_FILE", None)
    if args.pdl:
        if not pdl.supported(torch.device("cuda")):
            raise SystemExit("--pdl needs a GPU of compute capability >= 9")
        pdl.ENABLED = True
    if args.tc_tune_file:
        print(f"W12-TC: {K.load_tuning(args.tc_tune_file)} tuned configs from {args.tc_tune_file}")
    import triton
    dev = torch.cuda.get_device_properties(0)
    RESULTS["env"] = {"gpu": dev.name, "sms": dev.multi_processor_count, "torch": torch.__version__,
                      "triton": triton.__version__, "ptx_decode": K._ptx_decode(),
                      "ring_mb": args.ring_mb, "budget_s": args.budget, "max_cands": args.max_cands,
                      "pdl": dict(pdl.GEMV_TRIGGER) if args.pdl else None}
    print(RESULTS["env"], flush=True)
    t0 = time.time()
    models = args.models.split(",")
    shapes = []   # (model, layer, N, K, count)
    for model in models:
        rows = WB.layer_shapes(model)
        print(f"{model}: " + ", ".join(f"{n} {N}x{Kd} (x{c})" for n, N, Kd, c in rows))
        shapes += [(model, n, N, Kd, c) for n, N, Kd, c in rows]
    weights = build_weights(shapes, args.block_rows)
    print(f"weights built in {time.time() - t0:.0f} s", flush=True)
    correctness(weights, shapes, m_values)
    print(f"correctness done in {time.time() - t0:.0f} s", flush=True)

    # largest share of a token's time first (count x weight size), so the budget goes there
    order = sorted(weights, key=lambda nk: -sum(c for _, _, N, Kd, c in shapes if (N, Kd) == nk)
                   * nk[0] * nk[1])
    budget = Budget(args.budget, m_values)
    print("\n" + HEADER, flush=True)
    for N, Kd in order:
        users = [(m, n, c) for m, n, N2, K2, c in shapes if (N2, K2) == (N, Kd)]
        if time.time() - t0 > args.time_limit:
            print(f"time limit: {N}x{Kd} ({', '.join(n for _, n, _ in users)}) not timed", flush=True)
            RESULTS.setdefault("skipped", []).append([N, Kd])
            continue
        p, xbig = weights[(N, Kd)]
        time_shape(users, N, Kd, p, xbig, m_values, args, budget)
        torch.cuda.empty_cache()   # the rings of this shape
    esc_table()
    model_totals(models, m_values)
    RESULTS["budget_left_s"] = {f"{k}|m{m}": v for (k, m), v in budget.left.items()}
    return WB.finish(args.out, t0)


if __name__ == "__main__":
    sys.exit(main())
