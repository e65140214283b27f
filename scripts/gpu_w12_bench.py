"""W12 kernels on the GPU: correctness, then timing on real layer shapes (one script, < 5 min).

Run from the repository root on a CUDA machine (needs torch, triton and the repo only):

    PYTHONPATH=. python scripts/gpu_w12_bench.py --out /tmp/w12_bench.json

1. Correctness (one PASS/FAIL line per check) on a sweep of shapes with N(0, 0.02^2) bf16 weights
   plus injected escapes (subnormals, +-Inf, NaN, outliers, -0; one per-row-base tensor; one K
   that needs padding): decode kernel == CPU reference decoder (bitwise); fast ``w12_matmul`` vs
   fp32 torch on the decoded weights (worst relative error, same non-finite pattern);
   ``w12_matmul(reproducible=True)`` == ``bf16_matmul`` with the same config (bitwise), for two
   configs per M. The big replicated timing weights are also decoded and compared bitwise.
2. Timing of the linear layers of the models in specpilot/model_configs (fused qkv and gate_up
   shapes, derived from each config.json and printed) at M = 1..64: cuBLAS (torch.matmul), the
   autotuned bf16 Triton GEMM of the same template, and the autotuned W12 GEMM. Each timing
   replays a CUDA graph of calls that rotate over a ring of weight (and input) copies totalling
   >= --ring-mb (default 512 MB, ~10x the H200's L2), so no call finds its weights in L2;
   time per call = median of 5 replays / calls per replay. CUDA graphs remove the Python launch
   cost (tens of us per Triton launch), which would otherwise dominate; ``--eager`` times plain
   event-bracketed loops instead. Reports us, GB/s of weight bytes read (W12: L, H and escape
   entries; bf16: 2 bytes per weight), W12/cuBLAS and
   W12/Triton speedups (time ratios, > 1 = W12 faster), and per-model sums weighted by how often
   each layer runs per token.
   Autotuning (kernel.autotune: graph replays over a weight ring, as here) stops --tune-budget seconds after
   the start (default 200); later problems use kernel.default_config, marked '*'.

Weights for timing: one encoded block of --block-rows rows per K, replicated to N rows on the
GPU (encoding 1e9 weights on the CPU would take minutes); the escape list is rebuilt for the
replicated matrix.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from specpilot.w12 import kernel as K  # noqa: E402
from specpilot.w12.format import TILE_K, TILE_N, W12Tensor, bitwise_equal, decode, encode  # noqa: E402

CONFIG_DIR = os.path.join(os.path.dirname(__file__), "..", "specpilot", "model_configs")
MODELS = ("qwen38-27b", "muse-glimmer-30b")
M_VALUES = (1, 2, 4, 8, 16, 32, 64)


def bits(vals):
    return torch.tensor([v - 0x10000 if v >= 0x8000 else v for v in vals], dtype=torch.int16
                        ).view(torch.bfloat16)


ALL_EDGES = bits([0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x4780, 0xC6A0, 0x0080, 0x8000,
                  0x0000, 0x3F80])                  # subnormals, +-Inf, NaNs, outliers, +-0, 1.0
FINITE_EDGES = bits([0x0001, 0x807F, 0x4780, 0xC6A0, 0x0080, 0x8000, 0x2B80, 0x3F80])


# ---------------------------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------------------------

def layer_shapes(model: str) -> list:
    """[(name, N, K, uses per token)] of the linear layers, qkv and gate_up fused, shapes shared by
    several layer kinds merged."""
    with open(os.path.join(CONFIG_DIR, model, "config.json")) as f:
        c = json.load(f)
    arch = c["architectures"][0]
    h, inter, n_layers, vocab = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    nq, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or h // nq
    if arch == "Qwen3_5ForCausalLM":  # gated attention (q_proj = query + gate) and Gated DeltaNet
        types = c["layer_types"][:n_layers]
        n_full, n_lin = types.count("full_attention"), types.count("linear_attention")
        kd = c["linear_num_key_heads"] * c["linear_key_head_dim"]
        vd = c["linear_num_value_heads"] * c["linear_value_head_dim"]
        rows = [("attn qkv (q+gate,k,v)", 2 * nq * hd + 2 * nkv * hd, h, n_full),
                ("gdn in_proj (qkv,z,b,a)", 2 * kd + 2 * vd + 2 * c["linear_num_value_heads"], h, n_lin),
                ("attn o_proj", h, nq * hd, n_full), ("gdn out_proj", h, vd, n_lin)]
    elif arch == "MuseGlimmerForCausalLM":  # attention with an output gate projection of x
        rows = [("attn qkv+gate", 2 * nq * hd + 2 * nkv * hd, h, n_layers), ("attn o_proj", h, nq * hd, n_layers)]
    else:
        raise SystemExit(f"{model}: unknown architecture {arch}")
    rows += [("mlp gate_up", 2 * inter, h, n_layers), ("mlp down", h, inter, n_layers), ("lm_head", vocab, h, 1)]
    merged: dict = {}
    for name, N, Kd, count in rows:
        if (N, Kd) in merged:
            old = merged[(N, Kd)]
            merged[(N, Kd)] = (old[0] + " / " + name, N, Kd, old[3] + count)
        else:
            merged[(N, Kd)] = (name, N, Kd, count)
    return list(merged.values())


# ---------------------------------------------------------------------------------------------
# weights
# ---------------------------------------------------------------------------------------------

def make_weight(N, Kd, seed, edges, n_edges, per_row=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, Kd, generator=g) * 0.02
    if per_row:
        x = x * torch.pow(2.0, torch.randint(-10, 11, (N, 1), generator=g).float())
    x = x.bfloat16()
    idx = torch.randperm(x.numel(), generator=g)[:n_edges]
    x.view(-1)[idx] = edges[torch.arange(n_edges) % edges.numel()]
    return x


def replicate(block_w: W12Tensor, block_x: torch.Tensor, N: int):
    """(W12Tensor with L/H on the GPU, bf16 [N, K] on the GPU): the block's rows repeated to N."""
    R, Kp = block_w.L.shape
    reps = -(-N // R)
    L = block_w.L.cuda().repeat(reps, 1)[:N].contiguous()
    H = block_w.H.cuda().repeat(reps, 1)[:N].contiguous()
    x = block_x.cuda().repeat(reps, 1)[:N].contiguous()
    rows, cols, vals = K.escape_coords(block_w)
    rows = (rows.view(1, -1) + R * torch.arange(reps).view(-1, 1)).reshape(-1)
    cols, vals = cols.repeat(reps), vals.repeat(reps)
    keep = rows < N
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    n_tk = -(-Kp // TILE_K)
    tile = (rows // TILE_N) * n_tk + cols // TILE_K
    local = (rows % TILE_N) * TILE_K + cols % TILE_K
    order = torch.argsort(tile * (TILE_N * TILE_K) + local)
    esc = ((local << 16) | vals)[order].to(torch.int32)
    counts = torch.bincount(tile, minlength=-(-N // TILE_N) * n_tk)
    esc_off = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]).to(torch.int32)
    return W12Tensor((N, block_x.shape[1]), L, H, block_w.hb, esc_off, esc), x


# ---------------------------------------------------------------------------------------------
# checks and timing
# ---------------------------------------------------------------------------------------------

RESULTS: dict = {"correctness": [], "timing": [], "model_totals": []}


def report(name: str, ok: bool, detail: str = "") -> bool:
    print(f"{'PASS' if ok else 'FAIL'}  {name:58s} {detail}", flush=True)
    RESULTS["correctness"].append({"check": name, "ok": bool(ok), "detail": detail})
    return ok


def finish(path: str, t0: float) -> int:
    """Write RESULTS (with the elapsed time) to path, print the checks line; 1 if any failed."""
    RESULTS["elapsed_s"] = time.time() - t0
    with open(path, "w") as f:
        json.dump(RESULTS, f, indent=1)
    n_fail = sum(not c["ok"] for c in RESULTS["correctness"])
    print(f"\n{len(RESULTS['correctness']) - n_fail}/{len(RESULTS['correctness'])} checks passed; "
          f"{time.time() - t0:.0f} s; wrote {path}")
    return 1 if n_fail else 0


def rel_error(y: torch.Tensor, a: torch.Tensor, w: torch.Tensor):
    """(same non-finite pattern, ||y - ref|| / ||ref||, ||bf16(ref) - ref|| / ||ref||) over the
    finite outputs, ref = fp32 torch on the decoded weights. The last number is the floor that
    rounding the exact result to bf16 already costs; y should come close to it."""
    return compare(y, a.float() @ w.float().t())


def compare(y: torch.Tensor, ref: torch.Tensor):
    """rel_error's three numbers against a reference computed already."""
    yf = y.float()
    fin = torch.isfinite(ref)
    same = torch.equal(fin, torch.isfinite(yf)) and torch.equal(torch.isnan(ref), torch.isnan(yf))
    norm = ref[fin].norm().clamp_min(1e-30)
    floor = float((ref.bfloat16().float() - ref)[fin].norm() / norm)
    return same, float((yf - ref)[fin].norm() / norm), floor


def same_bits(a, b) -> bool:
    return torch.equal(a.view(torch.int16), b.view(torch.int16))


# correctness sweep: (N, K, per-row base, injected values, how many); K = 1000 needs padding
SWEEP = [(256, 512, False, ALL_EDGES, 64), (300, 1000, False, FINITE_EDGES, 40),
         (1024, 4096, False, FINITE_EDGES, 300), (512, 2048, True, FINITE_EDGES, 100),
         (2048, 5120, False, ALL_EDGES, 400)]
SWEEP_M = (1, 5, 16, 33, 64)


def correctness(quick: bool) -> None:
    sweep = [s for s in SWEEP if not quick or s[0] != 1024]
    for i, (N, Kd, per_row, edges, n_edges) in enumerate(sweep):
        tag = f"{N}x{Kd}{' per-row' if per_row else ''}"
        x = make_weight(N, Kd, i, edges, n_edges, per_row)
        w = encode(x, per_row=per_row)
        p = K.prepare(w, "cuda")
        report(f"decode kernel == reference, {tag}",
               bitwise_equal(K.decode_w12_gpu(p).cpu(), x) and bitwise_equal(decode(w), x),
               f"{w.n_escapes} escapes, base {'row' if w.per_row else 'tensor'}")
        xc = x.cuda()
        worst, floor, pattern, repro, n_repro = 0.0, 0.0, True, 0, 0
        for M in SWEEP_M:
            a = torch.randn(M, Kd, device="cuda").bfloat16()
            cands = K.candidate_configs(M, N, Kd, K._num_sms(a.device))
            picks = [next(c for c in cands if c.carry), next(c for c in cands if not c.carry)]
            for cfg in picks:  # one config with carried decoded tiles, one decoding in place
                same, err, fl = rel_error(K.w12_matmul(a, p, config=cfg), a, xc)
                pattern, worst, floor = pattern and same, max(worst, err), max(floor, fl)
                y12 = K.w12_matmul(a, p, reproducible=True, config=cfg)
                repro += same_bits(y12, K.bf16_matmul(a, xc, config=cfg))
                n_repro += 1
        report(f"w12_matmul vs torch fp32, {tag}", pattern and worst < 5e-3,
               f"worst rel err {worst:.2e}, bf16 rounding floor {floor:.2e} (5 M x 2 configs)")
        report(f"reproducible == bf16_matmul bitwise, {tag}", repro == n_repro, f"{repro}/{n_repro}")


def time_calls(fn, n_ring: int, eager: bool) -> float:
    """us per call of fn(i) rotating over i in range(n_ring): a replayed CUDA graph of the calls
    (``kernel.time_calls_us``, the autotuner's timing), or with ``eager`` plain launches,
    median of 5 repetitions."""
    for i in range(n_ring):
        fn(i)
    torch.cuda.synchronize()
    if not eager:
        return K.time_calls_us(fn, n_ring)
    calls = n_ring * max(1, -(-24 // n_ring))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        start.record()
        for c in range(calls):
            fn(c % n_ring)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / calls)
    return statistics.median(times)


def pick_config(kind: str, a: torch.Tensor, w, deadline: float):
    """(config, tuned?): kernel.get_config, autotuning only before the deadline."""
    cfg = K.get_config(kind, a, w, tune=time.time() < deadline)
    N = w.N if kind == "w12" else w.shape[0]
    return cfg, K._tune_key(kind, a.shape[0], N, a.shape[1], a.device) in K._TUNED


def timing(models, m_values, args, deadline: float) -> None:
    blocks: dict = {}
    print(f"\n{'model':16s} {'layer':28s} {'N':>6s} {'K':>6s} {'M':>3s} {'cuBLAS':>8s} {'TritonBF16':>10s} "
          f"{'W12':>8s} {'W12 GB/s':>8s} {'bf16 GB/s':>9s} {'x cuBLAS':>8s} {'x Triton':>8s}", flush=True)
    for model in models:
        for name, N, Kd, count in layer_shapes(model):
            if Kd not in blocks:
                bx = make_weight(args.block_rows, Kd, Kd, FINITE_EDGES, max(1, args.block_rows * Kd // 20000))
                blocks[Kd] = (encode(bx), bx)
            time_shape(model, name, N, Kd, count, blocks[Kd], m_values, args, deadline)
            torch.cuda.empty_cache()


def time_shape(model, name, N, Kd, count, block, m_values, args, deadline) -> None:
    """Time one layer shape at every M (prints and records one row per M)."""
    wbig, xbig = replicate(*block, N)
    p = K.prepare(wbig, "cuda")
    report(f"decode kernel == weights, replicated {N}x{Kd}", same_bits(K.decode_w12_gpu(p), xbig),
           f"{wbig.n_escapes} escapes")
    bf16_bytes, w12_bytes = N * Kd * 2, K.weight_bytes(p)
    ring12 = K.weight_ring(p, args.ring_mb * 2**20)   # the autotuner's ring
    n_ring = len(ring12)
    ring16 = [xbig] + [xbig.clone() for _ in range(n_ring - 1)]
    for M in m_values:
        acts = [torch.randn(M, Kd, device="cuda").bfloat16() for _ in range(n_ring)]
        c12, t12ok = pick_config("w12", acts[0], p, deadline)
        c16, t16ok = pick_config("bf16", acts[0], xbig, deadline)
        same, err, floor = rel_error(K.w12_matmul(acts[0], p, config=c12), acts[0], xbig)
        if not same or err > 5e-3:
            report(f"w12_matmul vs torch, {N}x{Kd} M={M} {c12}", False,
                   f"rel err {err:.2e}, bf16 rounding floor {floor:.2e}")
        t_cub = time_calls(lambda i: torch.matmul(acts[i], ring16[i].t()), n_ring, args.eager)
        t_tri = time_calls(lambda i: K.bf16_matmul(acts[i], ring16[i], config=c16), n_ring, args.eager)
        t_w12 = time_calls(lambda i: K.w12_matmul(acts[i], ring12[i], config=c12), n_ring, args.eager)
        row = {"model": model, "layer": name, "N": N, "K": Kd, "M": M, "count": count,
               "cublas_us": t_cub, "triton_bf16_us": t_tri, "w12_us": t_w12,
               "w12_GBps": w12_bytes / t_w12 / 1e3, "bf16_GBps": bf16_bytes / t_cub / 1e3,
               "triton_bf16_GBps": bf16_bytes / t_tri / 1e3, "w12_bytes": w12_bytes,
               "bf16_bytes": bf16_bytes, "w12_rel_err": err, "ring": n_ring,
               "w12_config": vars(c12) | {"tuned": t12ok}, "bf16_config": vars(c16) | {"tuned": t16ok}}
        RESULTS["timing"].append(row)
        print(f"{model:16s} {name[:28]:28s} {N:6d} {Kd:6d} {M:3d} {t_cub:8.1f} {t_tri:9.1f}{' ' if t16ok else '*'}"
              f" {t_w12:7.1f}{' ' if t12ok else '*'} {row['w12_GBps']:8.0f} {row['bf16_GBps']:9.0f} "
              f"{t_cub / t_w12:8.2f} {t_tri / t_w12:8.2f}", flush=True)


def model_totals(models, m_values) -> None:
    print(f"\n{'per token, linear layers':28s} {'M':>3s} {'cuBLAS ms':>9s} {'Triton ms':>9s} {'W12 ms':>8s} "
          f"{'x cuBLAS':>8s} {'x Triton':>8s}")
    for model in models:
        for M in m_values:
            rows = [r for r in RESULTS["timing"] if r["model"] == model and r["M"] == M]
            if not rows:
                continue
            tot = {k: sum(r[k] * r["count"] for r in rows) / 1000 for k in ("cublas_us", "triton_bf16_us", "w12_us")}
            RESULTS["model_totals"].append({"model": model, "M": M, **{k.replace("_us", "_ms"): v for k, v in tot.items()}})
            print(f"{model:28s} {M:3d} {tot['cublas_us']:9.2f} {tot['triton_bf16_us']:9.2f} {tot['w12_us']:8.2f} "
                  f"{tot['cublas_us'] / tot['w12_us']:8.2f} {tot['triton_bf16_us'] / tot['w12_us']:8.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON file for all results")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--m", default=None,
                    help=f"activation rows to time (default {','.join(map(str, M_VALUES))}; "
                    "with --quick 1,16,64)")
    ap.add_argument("--ring-mb", type=int, default=512, help="weight bytes rotated per timing")
    ap.add_argument("--block-rows", type=int, default=1024, help="rows encoded on the CPU per K")
    ap.add_argument("--tune-budget", type=float, default=200.0,
                    help="no new autotuning after this many seconds from the start")
    ap.add_argument("--eager", action="store_true", help="time eager loops instead of CUDA graphs")
    ap.add_argument("--quick", action="store_true",
                    help="smaller correctness sweep; M = 1, 16, 64 unless --m is given")
    ap.add_argument("--no-ptx", action="store_true", help="plain-Triton decode instead of the PTX")
    ap.add_argument("--save-tuning", default=None,
                    help="also write the tuned configs here (kernel.save_tuning format, which "
                         "$SPECPILOT_W12_TUNE_FILE loads, e.g. for scripts/gpu_w12_e2e.py)")
    args = ap.parse_args()
    if not torch.cuda.is_available() or not K.HAS_TRITON or K.INTERPRET:
        raise SystemExit("needs CUDA and Triton (and TRITON_INTERPRET unset)")
    if args.no_ptx:
        os.environ["SPECPILOT_W12_PTX"] = "0"
    os.environ.pop("SPECPILOT_W12_TUNE_FILE", None)
    import triton
    dev = torch.cuda.get_device_properties(0)
    env = {"gpu": dev.name, "sms": dev.multi_processor_count, "torch": torch.__version__,
           "triton": triton.__version__, "ptx_decode": K._ptx_decode(), "graphs": not args.eager,
           "ring_mb": args.ring_mb}
    RESULTS["env"] = env
    print(env, flush=True)
    t0 = time.time()
    models = args.models.split(",")
    m_values = (tuple(int(m) for m in args.m.split(",")) if args.m is not None
                else (1, 16, 64) if args.quick else M_VALUES)
    for model in models:
        print(f"{model}: " + ", ".join(f"{n} {N}x{Kd} (x{c})" for n, N, Kd, c in layer_shapes(model)))
    correctness(args.quick)
    print(f"correctness done in {time.time() - t0:.0f} s", flush=True)
    timing(models, m_values, args, t0 + args.tune_budget)
    model_totals(models, m_values)
    RESULTS["tuned_configs"] = {k: vars(v) for k, v in K._TUNED.items()}
    if args.save_tuning:
        K.save_tuning(args.save_tuning)
    return finish(args.out, t0)


if __name__ == "__main__":
    sys.exit(main())
