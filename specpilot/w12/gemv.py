"""CUDA-core GEMV for W12 weights at small M (1..8): decode to bf16 bits, widen to fp32, FMA.

Why: the tensor-core kernel (``kernel._gemm_kernel``) must move every decoded tile through a
register / shared-memory layout conversion before the MMA, and at M <= 16 it stays below cuBLAS
(docs/benchmarks/w12.md). The 16 bits of a bf16 value placed in the upper half of a 32-bit word
*are* its fp32 value, so a GEMV needs neither tensor cores nor a layout change: each thread
decodes the plane bytes it loaded (``kernel._decode_tiles``, inline PTX on the GPU), shifts them
into fp32 and multiply-accumulates them with fp32 activations on CUDA cores, all in the layout
the loads produced. At M = 1 the FMA rate needed is a small fraction of the GPU's fp32 rate, so
the kernel can be bound by HBM. Design notes: docs/w12.md, "CUDA-core GEMV for M <= 8".

Public API
----------
* ``w12_gemv(x, planes, config=None)``: ``x @ W^T`` (bf16 ``[M, N]``, fp32 accumulation) for
  x bf16 ``[M, K]`` with ``1 <= M <= MAX_M`` and a W12 weight (``W12Planes``, or a
  ``W12Tensor`` prepared on the fly).
* ``bf16_gemv(x, w, config=None)``: the same kernel template with a bf16 ``[N, K]`` weight (the
  baseline to compare against, and the one-row linear layers of bf16 models inside CUDA graphs:
  ``layers/linear.py``); ``bf16_gemv_config(x, w)``: the config it runs with.
* ``GemvConfig``, ``gemv_default_config(M, N, K)``, ``gemv_candidates(M, N, K)`` (the space a
  tuner or the GPU bench sweeps), ``gemv_supported(M)``.
* ``gemv_autotune(x, w)``: times the candidates on the GPU and caches the fastest per (GPU, M, N,
  K) where the GEMM's tuner caches its configs: in memory and, with ``$SPECPILOT_W12_TUNE_FILE``,
  in that JSON file (under "gemv-" keys; loaded on first use, so a new process does not tune again).

``kernel.w12_matmul`` runs it in fast mode at M = 1 (and at M <= ``kernel.GEMV_MAX_M`` where
the Gluon kernel cannot run). Like the GEMM, the kernel also runs in the Triton interpreter on
CPU tensors (plain Triton ops instead of the inline PTX).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

import torch

from specpilot.kernels import pdl as _pdl

from . import kernel as _k
from .kernel import ESC_PRE_CAND, ESC_PRE_VALUES, GROUP, W12Planes, _cdiv, prepare

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: nothing here can run (gemv_supported says False)
    triton = None
    tl = None

MAX_M = 8                  # activation rows per call (one accumulator per row, unrolled)
ESC_CHUNK = 16             # escapes per epilogue step (esc_pre 0)
ACC_ELEMENTWISE = 0        # acc[BN, BK] += w * x per row, reduced over BK once after the loop
ACC_REDUCE = 1             # acc[BN] += sum_k(w * x) per row, reduced in every K-step

# bf16x2 word -> two fp32: the low lane shifted up, the high lane with the low lane masked off
# (2 instructions per pair; Triton's own code extracts the high lane first, 3 per pair)
WIDEN_PTX = "shl.b32 $0, $2, 16; and.b32 $1, $2, 0xFFFF0000;"


if _k.HAS_TRITON:
    from .kernel import (_decode_tiles, _esc_epilogue, _esc_load, _esc_prologue, _hb_tile,
                         _store_out)

    _WIDEN_PTX = tl.constexpr(WIDEN_PTX)

    @triton.jit
    def _widen(t, PTX: tl.constexpr):
        """uint16 bf16 bits -> the same value as fp32 (exact: the bits become the fp32 high half).
        ``PTX``: two elements per instance of ``WIDEN_PTX`` (any pairing is correct, the
        operation is per element); else plain Triton ops (the interpreter)."""
        if PTX:
            w = tl.inline_asm_elementwise(_WIDEN_PTX, "=r,=r,r", [t], dtype=tl.float32,
                                          is_pure=True, pack=2)
        else:
            w = (t.to(tl.uint32) << 16).to(tl.float32, bitcast=True)
        return w

    @triton.jit
    def _load_w(w_tile, h_tile, j, HALF, w_m0, w_m1, W12: tl.constexpr):
        """The raw weight tiles of K-step ``j``: W12 -> L[:, j:j+BK], L[:, HALF+j:...],
        H[:, j:j+BK] (uint8 [BN, BK], the addressing of kernel._w12_tile); bf16 -> the bits of
        W[:, j:j+BK] and W[:, HALF+j:...] (uint16) and a dummy."""
        if W12:
            a = tl.load(w_tile + j, mask=w_m0, other=0, eviction_policy="evict_first")
            b = tl.load(w_tile + HALF + j, mask=w_m0, other=0, eviction_policy="evict_first")
            c = tl.load(h_tile + j, mask=w_m0, other=0, eviction_policy="evict_first")
        else:
            a = tl.load(w_tile + j, mask=w_m0, other=0.0,
                        eviction_policy="evict_first").to(tl.uint16, bitcast=True)
            b = tl.load(w_tile + HALF + j, mask=w_m1, other=0.0,
                        eviction_policy="evict_first").to(tl.uint16, bitcast=True)
            c = a
        return a, b, c

    @triton.jit
    def _w_fp32(a, b, c, hbt, W12: tl.constexpr, PTX: tl.constexpr):
        """Raw tiles (``_load_w``) -> the fp32 weights of the first / second half columns."""
        if W12:
            t0, t1 = _decode_tiles(a, b, c, hbt, PTX)
        else:
            t0 = a
            t1 = b
        return _widen(t0, PTX), _widen(t1, PTX)

    @triton.jit
    def _w_masks(j, xk, n_ok, HALF, K, W12: tl.constexpr, EVEN_K: tl.constexpr):
        """(w_m0, w_m1, x_m0, x_m1) of K-step j; with EVEN_K constant true masks, which Triton
        drops (rows are clamped instead, see _gemv_kernel). W12 planes store every pair column
        < HALF (K padding holds +0); the bf16 matrix has K columns. A masked weight is 0 bytes
        (W12: a finite value) or +0 and meets x == +0, so masked pairs add +0."""
        if EVEN_K:
            w_m0 = tl.full(xk.shape, 1, tl.int1)
            w_m1 = w_m0
            x_m0 = w_m0
            x_m1 = w_m0
        else:
            k0 = j + xk
            x_m0 = (k0 < HALF) & (k0 < K)
            x_m1 = (k0 < HALF) & (k0 + HALF < K)
            if W12:
                w_m0 = n_ok[:, None] & (k0 < HALF)
                w_m1 = w_m0
            else:
                w_m0 = n_ok[:, None] & x_m0
                w_m1 = n_ok[:, None] & x_m1
        return w_m0, w_m1, x_m0, x_m1

    @triton.jit
    def _row_step(acc, w0, w1, x_row, j, HALF, x_m0, x_m1, ACC: tl.constexpr, PTX: tl.constexpr):
        """One K-step of one activation row. ``x_row``: [BN, BK] pointers to x[m, k] (the same
        row k for every n: the load then gets the weight tiles' layout, see _gemv_kernel);
        w0 / w1: fp32 [BN, BK] weights of the first / second half columns.
        ACC_ELEMENTWISE: acc [BN, BK] += w * x (2 FFMA per pair, no cross-thread work);
        ACC_REDUCE: acc [BN] += sum_k w * x (in-thread adds, then warp shuffles)."""
        x0 = _widen(tl.load(x_row + j, mask=x_m0, other=0.0,
                            eviction_policy="evict_last").to(tl.uint16, bitcast=True), PTX)
        x1 = _widen(tl.load(x_row + HALF + j, mask=x_m1, other=0.0,
                            eviction_policy="evict_last").to(tl.uint16, bitcast=True), PTX)
        if ACC == 0:
            acc = acc + w0 * x0   # written as two updates so each fuses into one FFMA
            acc = acc + w1 * x1
        else:
            acc += tl.sum(w0 * x0 + w1 * x1, axis=1)
        return acc

    @triton.jit
    def _rows_step(acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, w0, w1, x_row0, x_row1,
                   x_row2, x_row3, x_row4, x_row5, x_row6, x_row7, j, HALF, x_m0, x_m1,
                   BM: tl.constexpr, ACC: tl.constexpr, PTX: tl.constexpr):
        """``_row_step`` for each of the BM activation rows (constexpr-unrolled, one accumulator
        per row; the accumulators past BM come back unchanged)."""
        acc0 = _row_step(acc0, w0, w1, x_row0, j, HALF, x_m0, x_m1, ACC, PTX)
        if BM > 1:
            acc1 = _row_step(acc1, w0, w1, x_row1, j, HALF, x_m0, x_m1, ACC, PTX)
        if BM > 2:
            acc2 = _row_step(acc2, w0, w1, x_row2, j, HALF, x_m0, x_m1, ACC, PTX)
        if BM > 3:
            acc3 = _row_step(acc3, w0, w1, x_row3, j, HALF, x_m0, x_m1, ACC, PTX)
        if BM > 4:
            acc4 = _row_step(acc4, w0, w1, x_row4, j, HALF, x_m0, x_m1, ACC, PTX)
        if BM > 5:
            acc5 = _row_step(acc5, w0, w1, x_row5, j, HALF, x_m0, x_m1, ACC, PTX)
        if BM > 6:
            acc6 = _row_step(acc6, w0, w1, x_row6, j, HALF, x_m0, x_m1, ACC, PTX)
        if BM > 7:
            acc7 = _row_step(acc7, w0, w1, x_row7, j, HALF, x_m0, x_m1, ACC, PTX)
        return acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7

    @triton.jit
    def _row_out(out, acc, m: tl.constexpr, ACC: tl.constexpr):
        """Write row m's result (acc reduced over BK if needed) into column m of out [BN, BMP]."""
        if ACC == 0:
            r = tl.sum(acc, axis=1)
        else:
            r = acc
        cols = tl.arange(0, out.shape[1])[None, :]
        return tl.where(cols == m, r[:, None], out)

    # M, G and the split values would otherwise be specialized (== 1, % 16), each a new compile
    @triton.jit(do_not_specialize=["M", "G", "SPLIT_K", "STEPS_PER_SPLIT"])
    def _gemv_kernel(x_ptr, y_ptr, ws_ptr, lock_ptr, w_ptr, h_ptr, hb_ptr, koff_ptr, kent_ptr,
                     kval_ptr, M, N, K, HALF, G, stride_xm, stride_w, stride_h, SPLIT_K,
                     STEPS_PER_SPLIT,
                     W12: tl.constexpr, HB_PER_ROW: tl.constexpr, USE_SPLIT: tl.constexpr,
                     EVEN_K: tl.constexpr, PTX: tl.constexpr, ACC: tl.constexpr,
                     BM: tl.constexpr, BMP: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                     IR: tl.constexpr, NRB: tl.constexpr, ESC_CH: tl.constexpr,
                     ESC_PRE: tl.constexpr,
                     ESC_LATE: tl.constexpr, STAGES: tl.constexpr, AHEAD: tl.constexpr,
                     PDL: tl.constexpr = 0):
        """y[M, N] = x[M, K] @ W[N, K]^T on CUDA cores; W from W12 planes (W12) or bf16 (w_ptr).

        Grid (cdiv(N, BN), SPLIT_K, cdiv(M, BM)); program s of SPLIT_K owns the K-steps
        [s * STEPS_PER_SPLIT, (s + 1) * STEPS_PER_SPLIT) of BK pair columns. K order, masks,
        escape index and split-K reduction are those of ``kernel._gemm_kernel`` (ESC_MODE 1).
        BM (1..8) activation rows per program, unrolled (one accumulator per row); BMP is BM
        rounded up to a power of two (the epilogue's tile width).

        Layout: every main-loop tensor is a 2-D [BN, BK] tile. The x tiles are loaded through
        [BN, BK] pointer tiles that repeat one x row for every n, so Triton's coalescing gives
        them the weight tiles' layout (16 contiguous pair columns per thread for the uint8
        planes) and the FMAs need no layout conversion; the repeated addresses are served by
        L1. A [BK] or [BM, BK] x tile would get a layout of its own and a conversion through
        shared memory (with barriers) in every step.

        Rows past N and x rows past M are clamped to the last valid row, so with EVEN_K no load
        is masked; their results are never stored. STAGES 1: a plain loop (latency hidden by
        the other programs on the SM); STAGES >= 2: Triton's software pipeline (cp.async of the
        plane and x tiles into shared memory, STAGES - 1 steps ahead). AHEAD 1: the weight tiles
        of step s + 1 are loaded into registers before step s is computed, so each program keeps
        two steps of weight loads in flight (faster for the bf16 form; the W12 form's decode
        registers then cost it occupancy, see gemv_candidates). AHEAD 2: only the first step's
        tiles are loaded early, before the PDL wait, and that step is peeled off the loop, so
        the loop holds no more registers than the plain one (with PDL the first loads overlap
        the previous kernel's tail; without, it is the plain loop reordered).

        Escapes (W12): the program's entries of the escape index (those of its own BN rows in
        its K range: the index is sorted by IR-row block, IR = 16 by default; ~25-100 per 16
        rows for N(0, 0.02^2) weights at K = 5k-20k; NRB = cdiv(BN, IR)) are added after the
        main loop, ESC_CH at a time; each chunk is an index load and then a dependent gather of
        x, so the epilogue is a chain of dependent memory round trips that nothing overlaps when
        all programs fit in one wave. Without split-K they are one contiguous index range, else
        one per row block, read as one list (kernel._esc_table: the ranges' offsets in one
        round trip, chunks across ranges). ESC_PRE > 0: the list's offsets and its first
        ESC_PRE entries are loaded before the main loop (their latency hidden behind it) and
        the rest go ESC_PRE at a time; the x gathers then hit L1 (this program has just
        streamed x). Loading the entries needs the range (a dependent load), so the warps wait
        one round trip before their first weight loads; ESC_LATE instead issues the entry loads
        inside the first K-step, after its weight loads (predicated off in the other steps, the
        previous value kept), so that no wait is exposed.

        PDL (launched with programmatic dependent launch, ``kernels/pdl.py``; 0: not): the
        program loads what no earlier kernel writes (the escape prologue, the first weight
        tiles with AHEAD 1 or 2) and waits for the previous kernel before the main loop, its
        first read of x; every write comes after that. It lets the next kernel launch at its
        start (PDL 1, before its wait), after its main loop (PDL 2) or right after its wait
        (PDL 3).
        """
        _pdl.launch_dependents(PDL == 1)
        pid_n = tl.program_id(0)
        pid_k = tl.program_id(1)
        pid_m = tl.program_id(2)
        n0 = pid_n * BN
        m0 = pid_m * BM
        rn = n0 + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        n_ok = rn < N
        rn_c = tl.minimum(rn, N - 1).to(tl.int64)
        s0 = pid_k * STEPS_PER_SPLIT
        s1 = tl.minimum(s0 + STEPS_PER_SPLIT, tl.cdiv(HALF, BK))
        w_tile = w_ptr + rn_c[:, None] * stride_w + rk[None, :]                 # [BN, BK]
        xk = tl.broadcast_to(rk[None, :], (BN, BK))                             # [BN, BK]
        x_row0 = x_ptr + tl.minimum(m0, M - 1).to(tl.int64) * stride_xm + xk
        x_row1 = x_ptr + tl.minimum(m0 + 1, M - 1).to(tl.int64) * stride_xm + xk
        x_row2 = x_ptr + tl.minimum(m0 + 2, M - 1).to(tl.int64) * stride_xm + xk
        x_row3 = x_ptr + tl.minimum(m0 + 3, M - 1).to(tl.int64) * stride_xm + xk
        x_row4 = x_ptr + tl.minimum(m0 + 4, M - 1).to(tl.int64) * stride_xm + xk
        x_row5 = x_ptr + tl.minimum(m0 + 5, M - 1).to(tl.int64) * stride_xm + xk
        x_row6 = x_ptr + tl.minimum(m0 + 6, M - 1).to(tl.int64) * stride_xm + xk
        x_row7 = x_ptr + tl.minimum(m0 + 7, M - 1).to(tl.int64) * stride_xm + xk
        if W12:
            h_tile = h_ptr + rn_c[:, None] * stride_h + rk[None, :]
            hbt = _hb_tile(hb_ptr, rn_c, rn_c >= 0, BK, HB_PER_ROW)
            # ESC_PRE: the epilogue's first entries in flight during the loop (ESC_LATE: loaded
            # in its first K-step)
            g0, g1, shift, cend, total, ent_p, val_p = _esc_prologue(
                koff_ptr, kent_ptr, kval_ptr, n0, N, G, s0, s1, BK, IR, NRB, not USE_SPLIT,
                ESC_PRE, not ESC_LATE)
        else:
            h_tile = w_tile
            hbt = 0
        if ACC == 0:
            acc0 = tl.zeros((BN, BK), dtype=tl.float32)
        else:
            acc0 = tl.zeros((BN,), dtype=tl.float32)
        acc1 = acc0
        acc2 = acc0
        acc3 = acc0
        acc4 = acc0
        acc5 = acc0
        acc6 = acc0
        acc7 = acc0
        if AHEAD == 1:   # the first K-step's raw weight tiles, loaded before the loop
            w_m0, w_m1, _, _ = _w_masks(s0 * BK, xk, n_ok, HALF, K, W12, EVEN_K)
            a, b, c = _load_w(w_tile, h_tile, s0 * BK, HALF, w_m0, w_m1, W12)
        if AHEAD == 2:   # the same, for the peeled first step below (names of their own, so the
            #              loop does not carry them)
            w_m0, w_m1, _, _ = _w_masks(s0 * BK, xk, n_ok, HALF, K, W12, EVEN_K)
            a_f, b_f, c_f = _load_w(w_tile, h_tile, s0 * BK, HALF, w_m0, w_m1, W12)
        _pdl.wait(PDL > 0)   # x (and every write) only after the previous kernel has completed
        _pdl.launch_dependents(PDL == 3)
        s_lo = s0
        if AHEAD == 2:   # the first K-step on the tiles loaded before the wait (every split range
            #              has >= 1 step: kernel._plan)
            _, _, x_m0, x_m1 = _w_masks(s0 * BK, xk, n_ok, HALF, K, W12, EVEN_K)
            w0, w1 = _w_fp32(a_f, b_f, c_f, hbt, W12, PTX)
            acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7 = _rows_step(
                acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, w0, w1, x_row0, x_row1, x_row2,
                x_row3, x_row4, x_row5, x_row6, x_row7, s0 * BK, HALF, x_m0, x_m1, BM, ACC, PTX)
            s_lo = s0 + 1
        for s in tl.range(s_lo, s1, num_stages=STAGES):
            j = s * BK
            w_m0, w_m1, x_m0, x_m1 = _w_masks(j, xk, n_ok, HALF, K, W12, EVEN_K)
            if AHEAD == 1:   # issue the next step's loads before this step's math (the last
                #              step loads itself again, a cache hit)
                jn = tl.minimum(s + 1, s1 - 1) * BK
                n_m0, n_m1, _, _ = _w_masks(jn, xk, n_ok, HALF, K, W12, EVEN_K)
                an, bn, cn = _load_w(w_tile, h_tile, jn, HALF, n_m0, n_m1, W12)
            else:
                a, b, c = _load_w(w_tile, h_tile, j, HALF, w_m0, w_m1, W12)
            if ESC_LATE:   # the escape entries, issued after the first step's weight loads (a
                #            predicated-off load in the other steps keeps them)
                ent_p, val_p, _ = _esc_load(kent_ptr, kval_ptr, shift, cend, total, 0, s - s0,
                                            ent_p, val_p, ESC_PRE)
            w0, w1 = _w_fp32(a, b, c, hbt, W12, PTX)
            # one accumulator per activation row (constexpr-unrolled)
            acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7 = _rows_step(
                acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, w0, w1, x_row0, x_row1, x_row2,
                x_row3, x_row4, x_row5, x_row6, x_row7, j, HALF, x_m0, x_m1, BM, ACC, PTX)
            if AHEAD == 1:
                a, b, c = an, bn, cn

        _pdl.launch_dependents(PDL == 2)
        # the BM row results as columns of out [BN, BMP] (epilogue, once per program)
        out = tl.zeros((BN, BMP), dtype=tl.float32)
        out = _row_out(out, acc0, 0, ACC)
        if BM > 1:
            out = _row_out(out, acc1, 1, ACC)
        if BM > 2:
            out = _row_out(out, acc2, 2, ACC)
        if BM > 3:
            out = _row_out(out, acc3, 3, ACC)
        if BM > 4:
            out = _row_out(out, acc4, 4, ACC)
        if BM > 5:
            out = _row_out(out, acc5, 5, ACC)
        if BM > 6:
            out = _row_out(out, acc6, 6, ACC)
        if BM > 7:
            out = _row_out(out, acc7, 7, ACC)
        cm = tl.arange(0, BMP)
        rm = m0 + cm
        m_ok = (cm < BM) & (rm < M)

        if W12:   # escapes decoded to signed zero above: their exact products, CUDA-core FMA
            out = _esc_epilogue(out, ent_p, val_p, shift, cend, total, n0, N, G, g0, g1,
                                koff_ptr, kent_ptr, kval_ptr, x_ptr, rm, m_ok, stride_xm, False,
                                True, BN, IR, NRB, not USE_SPLIT, ESC_CH, ESC_PRE)

        _store_out(y_ptr, ws_ptr, lock_ptr, out, rm.to(tl.int64)[None, :] * N + rn[:, None],
                   m_ok[None, :] & n_ok[:, None], M, N, SPLIT_K, pid_k, pid_m, pid_n, USE_SPLIT)

    INTERPRET = type(_gemv_kernel).__name__ == "InterpretedFunction"
else:
    INTERPRET = False


# ---------------------------------------------------------------------------------------------
# Configs
# ---------------------------------------------------------------------------------------------

_SHORT = re.compile(r"n(\d+)k(\d+)s(\d+)w(\d+)p(\d+)m(\d+)([er])([af]?)(?:x(\d+))?(l?)")  # .short


@dataclass(frozen=True)
class GemvConfig:
    """Tiling of ``_gemv_kernel``.

    block_n weight rows and block_k pair columns (2 * block_k weights) per program and K-step;
    split_k K-ranges (deterministic split-K reduction); block_m activation rows per program
    (1..8, unrolled; normally M); acc: ``ACC_ELEMENTWISE`` or ``ACC_REDUCE``; num_stages 1 = a
    plain loop, >= 2 = Triton's software pipeline over that many stages; ahead 1 = the plain loop
    with the next K-step's weights loaded into registers a step early (two steps in flight);
    ahead 2 = the first K-step's weights loaded before the PDL wait and that step peeled off the
    plain loop (label ``f``);
    esc_pre (W12 only) > 0: the program's escape list (offsets) and its first esc_pre entries
    loaded before the main loop, the rest esc_pre at a time (see _gemv_kernel); 0: all of them
    after the loop, ``ESC_CHUNK`` at a time; esc_late 1 (with esc_pre): those entries loaded
    inside the first K-step instead, after its weight loads.

    Every thread must hold >= 4 consecutive pair columns of a tile (the inline-PTX decode
    takes 4 pair columns per instance), i.e. ``block_n * block_k >= 4 * 32 * num_warps``.
    """
    block_n: int = 16
    block_k: int = 128
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 1
    block_m: int = 1
    acc: int = ACC_ELEMENTWISE
    ahead: int = 0
    esc_pre: int = 0
    esc_late: int = 0

    def __post_init__(self):
        bad = []
        if self.block_n < 1 or self.block_n & (self.block_n - 1) or self.block_n > _k.IDX_SPAN:
            bad.append(f"block_n must be a power of two <= {_k.IDX_SPAN} (escape entries keep "
                       f"row % {_k.IDX_SPAN})")
        if self.block_k < GROUP or self.block_k & (self.block_k - 1):
            bad.append(f"block_k must be a power of two >= {GROUP}")
        if not 1 <= self.block_m <= MAX_M:
            bad.append(f"block_m must be in 1..{MAX_M}")
        if self.split_k < 1 or self.num_stages < 1:
            bad.append("split_k and num_stages must be >= 1")
        if self.num_warps not in (1, 2, 4, 8, 16):
            bad.append("num_warps must be 1, 2, 4, 8 or 16")
        if self.acc not in (ACC_ELEMENTWISE, ACC_REDUCE):
            bad.append("acc must be ACC_ELEMENTWISE (0) or ACC_REDUCE (1)")
        if self.ahead not in (0, 1, 2) or (self.ahead and self.num_stages > 1):
            bad.append("ahead must be 0, 1 or 2, and 0 with num_stages > 1")
        if self.esc_pre not in ESC_PRE_VALUES:
            bad.append(f"esc_pre must be one of {ESC_PRE_VALUES}")
        if self.esc_late not in (0, 1) or (self.esc_late and not self.esc_pre):
            bad.append("esc_late must be 0 or 1, and 0 without esc_pre")
        if self.esc_late and self.ahead == 2:
            bad.append("esc_late loads in the loop's first step, which ahead 2 peels off")
        if not bad and self.block_n * self.block_k < 4 * 32 * self.num_warps:
            bad.append("block_n * block_k must be >= 4 * 32 * num_warps (4 pair columns per "
                       "thread)")
        if bad:
            raise ValueError(f"invalid GemvConfig {self}: " + "; ".join(bad))

    @classmethod
    def from_short(cls, label: str) -> "GemvConfig":
        """The config whose ``short`` label is ``label`` (as printed by the benches and kept in
        their JSON), e.g. ``n16k256s2w4p1m1ex64``; a ValueError for anything else."""
        m = _SHORT.fullmatch(label.strip())
        if m is None:
            raise ValueError(f"not a GemvConfig label: {label!r} (expected e.g. n16k256s1w4p1m1e, "
                             f"optionally followed by a or f, x<esc_pre>, l)")
        bn, bk, sk, nw, ns, bm, acc, ahead, pre, late = m.groups()
        return cls(block_n=int(bn), block_k=int(bk), split_k=int(sk), num_warps=int(nw),
                   num_stages=int(ns), block_m=int(bm),
                   acc=ACC_ELEMENTWISE if acc == "e" else ACC_REDUCE,
                   ahead={"": 0, "a": 1, "f": 2}[ahead],
                   esc_pre=int(pre or 0), esc_late=int(bool(late)))

    @property
    def short(self) -> str:
        """Compact label: bn/bk/split/warps/stages/bm/acc, then 'a' for ahead 1 / 'f' for ahead 2,
        'x<esc_pre>' if esc_pre, 'l' if esc_late."""
        return (f"n{self.block_n}k{self.block_k}s{self.split_k}w{self.num_warps}"
                f"p{self.num_stages}m{self.block_m}{'e' if self.acc == ACC_ELEMENTWISE else 'r'}"
                f"{('', 'a', 'f')[self.ahead]}{f'x{self.esc_pre}' if self.esc_pre else ''}"
                f"{'l' if self.esc_late else ''}")


def gemv_supported(M: int) -> bool:
    """Whether ``w12_gemv`` / ``bf16_gemv`` take M activation rows (and Triton is present)."""
    return _k.HAS_TRITON and 1 <= int(M) <= MAX_M


def _half(K: int) -> int:
    """Pair columns of a K-column weight (W12 pads K to a multiple of 32)."""
    return _cdiv(K, 32) * 16


def _smem_bytes(cfg: GemvConfig, w12: bool = True) -> int:
    """Shared memory of the software pipeline (num_stages >= 2): per stage the weight tiles
    (three uint8 planes or two bf16 tiles) and, per activation row, two bf16 x tiles of the
    weight tiles' shape (x is loaded as a [BN, BK] tile repeating one row, see _gemv_kernel)."""
    if cfg.num_stages < 2:
        return 0
    tile = cfg.block_n * cfg.block_k
    per_stage = (3 * tile if w12 else 4 * tile) + cfg.block_m * 4 * tile
    return (cfg.num_stages - 1) * per_stage


SMEM_LIMIT = 96 << 10   # candidates with a pipeline larger than this are left out (>= 2 per SM)


def gemv_default_config(M: int, N: int, K: int, n_sm: int = 132) -> GemvConfig:
    """Untuned GPU config (autotuning off). Elementwise accumulators throughout. M = 1: 16 rows x
    256 pair columns, 4 warps, the tiling that won 7 of the 11 layer shapes of session 24's H200
    sweep (docs/benchmarks/w12.md). M = 2: 16 x 128 and M >= 3: 8 x 128 (chosen from the
    compiled code, sm_90 SASS: fewest instructions per weight at a moderate register count).
    Split-K: the smallest power of two giving >= 2 programs per SM (kernel._pick_split)."""
    bm = min(max(int(M), 1), MAX_M)
    bn = 16 if bm <= 2 else 8
    bk = _k._block_k(256 if bm == 1 else 128, K)
    split = _k._pick_split(_cdiv(N, bn), _cdiv(_half(K), bk), n_sm)
    return GemvConfig(block_n=bn, block_k=bk, split_k=split, num_warps=4, num_stages=1,
                      block_m=bm, acc=ACC_ELEMENTWISE)


# (block_n, block_k, num_warps, num_stages, acc, ahead) tilings swept by gemv_candidates, most
# promising first (a budget-limited sweep keeps the head of the list): 8-32 pair columns of
# 1-2 weight rows per thread; stages >= 2 use Triton's cp.async pipeline, ahead 1 the register
# look-ahead of the plain loop (bf16 only: it won 9 of 11 layer shapes of the bf16 GEMV at M = 1
# and none of the W12 GEMV's, where the decode's registers make it 30-57% slower; H200 sweep of
# session 25, docs/benchmarks/w12.md), ahead 2 the first step's loads before the PDL wait.
# M <= 2: no pipelined or 64-column tilings (1.6-4x and 1.3-1.9x slower than the best at M = 1 on
# all 11 layer shapes, both kinds, session 28's sweep); 512 pair columns at 8 / 4 warps keep
# twice the bytes in flight per program at the same registers per thread (narrow layers have
# only 2-5 programs per SM).
_E, _R = ACC_ELEMENTWISE, ACC_REDUCE
_BASES_SMALL_M = [  # M <= 2
    (16, 256, 4, 1, _E, 0), (8, 256, 2, 1, _E, 1), (16, 256, 4, 1, _E, 2), (8, 256, 2, 1, _E, 0),
    (8, 256, 2, 1, _E, 2), (16, 512, 8, 1, _E, 0), (16, 512, 8, 1, _E, 2), (8, 512, 4, 1, _E, 0),
    (16, 128, 4, 1, _E, 1), (32, 128, 4, 1, _E, 0), (16, 256, 4, 1, _E, 1), (16, 128, 4, 1, _E, 0),
    (32, 256, 8, 1, _E, 0), (32, 128, 4, 1, _R, 0),
]
_BASES_LARGE_M = [  # M >= 3
    (8, 128, 4, 1, _E, 0), (16, 128, 4, 1, _R, 0), (16, 64, 4, 1, _E, 0), (32, 128, 4, 1, _R, 0),
    (16, 256, 8, 1, _R, 0), (8, 64, 2, 1, _E, 0), (16, 128, 4, 2, _R, 0), (4, 256, 2, 3, _R, 0),
    (8, 256, 2, 1, _R, 0), (32, 64, 2, 1, _R, 0),
]
MAX_CANDIDATES = 36


def gemv_candidates(M: int, N: int, K: int, n_sm: int = 132, kind: str = "w12") -> list:
    """The tuning space for one shape: the first ``MAX_CANDIDATES`` configs, most promising first.

    Fourteen tilings for M <= 2 (``_BASES_SMALL_M``; the three with the register look-ahead
    only for the bf16 kind), ten above (``_BASES_LARGE_M``); block_n 4..32, block_k 64..512
    pair columns, 2-8 warps, 1-4 stages, both accumulate modes; each at the split-K that gives
    >= 2 programs per SM (kernel._pick_split: N = 5120 has 160 tiles of 32 rows -> split 2) and
    then all of them at twice that split. block_m = M. Pipelined tilings whose shared memory
    exceeds SMEM_LIMIT are left out. The W12 kind has each plain-loop tiling twice: escapes
    after the main loop (esc_pre 0) and read before it (``ESC_PRE_CAND``)."""
    bm = min(max(int(M), 1), MAX_M)
    bases = _BASES_SMALL_M if bm <= 2 else _BASES_LARGE_M
    out: dict = {}
    for mult in (1, 2):
        for bn, bk, warps, stages, acc, ahead in bases:
            bk = _k._block_k(bk, K)
            if bn * bk < 4 * 32 * warps or (ahead == 1 and kind == "w12"):
                continue
            split = _k._pick_split(_cdiv(N, bn), _cdiv(_half(K), bk), n_sm)
            split = min(32, mult * split, _cdiv(_half(K), bk))
            early = kind == "w12" and stages == 1
            for pre in (0, ESC_PRE_CAND) if early else (0,):
                cfg = GemvConfig(block_n=bn, block_k=bk, split_k=split, num_warps=warps,
                                 num_stages=stages, block_m=bm, acc=acc, ahead=ahead, esc_pre=pre)
                if _smem_bytes(cfg, kind == "w12") <= SMEM_LIMIT:
                    out[cfg] = None
    return list(out)[:MAX_CANDIDATES]


# interpreter / CPU: small tiles, split-K on so the tests cover the ticketed reduction
INTERPRETER_CONFIG = GemvConfig(block_n=16, block_k=32, split_k=2, num_warps=1, num_stages=1,
                                block_m=1, acc=ACC_ELEMENTWISE)


# ---------------------------------------------------------------------------------------------
# Launchers
# ---------------------------------------------------------------------------------------------

def _launch(x: torch.Tensor, w, cfg: GemvConfig, w12: bool) -> torch.Tensor:
    """Run ``_gemv_kernel`` with ``cfg``. ``w``: W12Planes (w12) or bf16 [N, K] (not w12)."""
    M, K = x.shape
    p = _k._plan(x, w, cfg, w12)
    if p.N == 0:
        return p.y
    bm = cfg.block_m
    _gemv_kernel[p.grid](
        x, p.y, p.ws, p.locks, *p.ops,
        M, p.N, K, p.half, _cdiv(p.half, GROUP), x.stride(0), p.stride_w, p.stride_h, p.split,
        p.per_split,
        W12=w12, HB_PER_ROW=w12 and w.per_row, USE_SPLIT=p.split > 1,
        EVEN_K=(p.Kp == K and p.half % cfg.block_k == 0), PTX=_k._ptx_decode(), ACC=cfg.acc,
        BM=bm, BMP=1 << (bm - 1).bit_length(), BN=cfg.block_n, BK=cfg.block_k,
        IR=p.ir, NRB=_cdiv(cfg.block_n, p.ir), ESC_CH=ESC_CHUNK,
        ESC_PRE=cfg.esc_pre if w12 else 0,
        ESC_LATE=bool(w12 and cfg.esc_late), STAGES=cfg.num_stages, AHEAD=int(cfg.ahead),
        num_warps=cfg.num_warps, num_stages=1,
        **_pdl.launch_args(x, _pdl.GEMV_TRIGGER["w12" if w12 else "bf16"]))
    return p.y


def _rows(x: torch.Tensor, K: int) -> torch.Tensor:
    """x validated: bf16 [M, K] with unit column stride and 1 <= M <= MAX_M (M = 0 passes)."""
    x = _k._as_2d_bf16(x, K)
    if x.shape[0] > MAX_M:
        raise ValueError(f"the GEMV takes at most {MAX_M} activation rows, got M = {x.shape[0]} "
                         f"(use kernel.w12_matmul / bf16_matmul for larger M)")
    return x


def _tune_key(x: torch.Tensor, N: int, K: int, w12: bool) -> str:
    """Key in kernel's tune cache and file: "gemv-w12" / "gemv-bf16", GPU model, M, N, K."""
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    kind = _k.GEMV_KEY_PREFIX + ("w12" if w12 else "bf16")
    return f"{kind}|{_k._gpu_name(index)}|m{x.shape[0]}|n{N}|k{K}"


def gemv_autotune(x: torch.Tensor, w, w12: bool = True, candidates=None) -> GemvConfig:
    """Time ``gemv_candidates`` on (x, w) as kernel.autotune times the GEMM's (CUDA-graph replays
    rotating over a >= 512 MB ring of weight copies) and cache the fastest for (GPU, M, N, K), in
    memory and in $SPECPILOT_W12_TUNE_FILE if set (``kernel._remember``)."""
    N, K = (w.N, w.K) if w12 else tuple(w.shape)
    M = x.shape[0]
    cands = candidates or gemv_candidates(M, N, K, _k._num_sms(x.device),
                                          "w12" if w12 else "bf16")
    ring = _k.weight_ring(w)
    best = _k.fastest(cands, lambda c: lambda i: _launch(x, ring[i], c, w12), len(ring),
                      f"gemv {'w12' if w12 else 'bf16'} M={M} N={N} K={K}")
    _k._remember(_tune_key(x, N, K, w12), best)
    return best


def _tuned_config(x: torch.Tensor, w, N: int, K: int, w12: bool) -> GemvConfig:
    """The tuned config (in memory, or read from $SPECPILOT_W12_TUNE_FILE on first use); else
    tuning now when kernel.autotune_enabled(); else gemv_default_config."""
    return _k.cached_or_tuned(
        _tune_key(x, N, K, w12), lambda: gemv_autotune(x, w, w12),
        lambda: gemv_default_config(x.shape[0], N, K, _k._num_sms(x.device)))


def _config_for(x: torch.Tensor, w, N: int, K: int, config, w12: bool) -> GemvConfig:
    """config as given; else the interpreter's; else ``_tuned_config``."""
    if config is not None:
        if not isinstance(config, GemvConfig):
            raise TypeError(f"config must be a GemvConfig, got {type(config).__name__}")
        return config
    if not x.is_cuda:   # interpreter: small tiles (speed), every row of x in one program
        return replace(INTERPRETER_CONFIG, block_m=x.shape[0])
    return _tuned_config(x, w, N, K, w12)


def w12_gemv(x: torch.Tensor, planes, config: GemvConfig | None = None) -> torch.Tensor:
    """``x @ W^T`` (bf16 ``[M, N]``, fp32 accumulation) for x bf16 ``[M, K]``, ``M <= MAX_M``,
    on CUDA cores. ``planes``: ``W12Planes`` (or a ``W12Tensor``, prepared on the fly: slow,
    for tools and tests). Escapes are added in an epilogue as exact fp32 products (as the GEMM's
    fast mode: only the fp32 summation order differs from a plain sum). ``config``: a fixed
    tiling (default: the tuned one, see ``_config_for``; the interpreter uses small tiles)."""
    planes = planes if isinstance(planes, W12Planes) else prepare(planes, x.device)
    x = _rows(x, planes.K)
    if x.shape[0] == 0:
        return x.new_empty((0, planes.N))
    return _launch(x, planes, _config_for(x, planes, planes.N, planes.K, config, True), True)


def bf16_gemv_config(x: torch.Tensor, w: torch.Tensor) -> GemvConfig:
    """The config ``bf16_gemv(x, w)`` runs with (tuning it now where ``w12_gemv`` would)."""
    return _config_for(_rows(x, w.shape[1]), w, w.shape[0], w.shape[1], None, False)


def bf16_gemv(x: torch.Tensor, w: torch.Tensor, config: GemvConfig | None = None) -> torch.Tensor:
    """``x @ w^T`` with the GEMV template and a bf16 weight ``[N, K]`` (the baseline of
    ``w12_gemv``: same tiling, K order and accumulation; the weight loaded instead of
    decoded)."""
    if w.dim() != 2 or w.dtype != torch.bfloat16:
        raise ValueError(f"expected w bf16 [N, K], got {w.dtype} {tuple(w.shape)}")
    w = w if w.stride(1) == 1 else w.contiguous()
    x = _rows(x, w.shape[1])
    if x.shape[0] == 0:
        return x.new_empty((0, w.shape[0]))
    return _launch(x, w, _config_for(x, w, w.shape[0], w.shape[1], config, False), False)
