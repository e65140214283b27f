"""W12 GEMM on tensor cores for few activation rows (M <= 16), with explicit register layouts.

Why: the Triton GEMM (``kernel._gemm_kernel``) lets the compiler choose layouts, so every decoded
weight tile goes through a layout conversion (shared memory or shuffles) before the MMA, and at
M = 4-16 it runs at 0.91-0.93x of cuBLAS (docs/benchmarks/w12.md, session 28). This kernel is
written in Gluon (Triton's layout-explicit dialect): each thread loads 16-byte runs of the planes
and decodes them in place, and the decoded words are already the A-operand registers of
``mma.sync.m16n8k16`` (bf16 in, fp32 accumulate), because the MMA's K index is *relabelled*:

* A thread of the MMA holds, per 16 x 16 A tile, rows ``g`` and ``g + 8`` (``g = lane // 4``) and
  the K slots ``2c, 2c+1`` and ``2c+8, 2c+9`` (``c = lane % 4``). A sum over K does not care which
  weight column sits in which K slot, as long as the activation (B operand) puts the same column
  there. So the slots are given the columns the thread loaded: slot pair ``(2c, 2c+1)`` of MMA
  step ``s`` holds pair columns ``16c + 4s + {0, 1}`` of the round, ``(2c+8, 2c+9)`` holds
  ``16c + 4s + {2, 3}``, and the B registers load x at the same columns.
* MMA row slot ``g`` is weight row ``2g`` of the 16-row block, slot ``g + 8`` row ``2g + 1``, so a
  thread's two rows are adjacent (its loads: 16 bytes of each plane from each of the two rows).
* One H word (4 pair columns) decodes (``kernel.DECODE_PTX``) into four bf16x2 words: two of the
  first half's columns (slot pairs of the MMA for the first half) and two of the second half's.

Per round, a warp covers 16 rows x 16S pair columns (S = ``MmaConfig.words`` H words per lane):
per thread 6 S / 4 16-byte plane loads, 2S decode calls and 2S MMAs per 8 activation rows.
The warps of a program split K (``WK``); their partial sums meet in one cross-warp reduction at
the end. Across programs K is split only with ``MmaConfig.split`` > 1 (an fp32 workspace and a
ticket, as the template GEMM's split-K; the tuner offers it on weights of few row blocks).

Escapes decode to signed zero. Their exact products (bf16 x bf16, exact in fp32) are computed
before the main loop while the first round's loads are in flight, or, with
``MmaConfig.esc_pre``, after it from entries loaded before it, or, with ``MmaConfig.esc_mma``,
as tensor-core MMAs before it (``_esc_mma``; with a non-finite activation at an escape's column
the rows of that MMA that do not hold the escape get 0 x Inf = NaN where the product path would
give their own +-Inf: garbage either way). Fast mode only: not bit-equal to
the bf16 GEMM; ``kernel.w12_matmul``'s reproducible mode keeps the template GEMM. Design notes
and measurements: docs/w12.md, "Tensor-core kernel for few rows".

GPU only (sm_80+: ``mma.sync``). Gluon has no interpreter, so on CPU the tests compile the
kernel for sm_90 and check its code; the numerics are checked on the GPU.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..kernels import pdl as _pdl
from . import kernel as _k
from .kernel import DECODE_PTX, GROUP, IDX_ROWS, W12Planes, _cdiv

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
except ImportError:  # no Triton, or one without Gluon: mma_supported() says False
    gluon = None
    gl = None

HAS_GLUON = gluon is not None
MAX_M = 16                 # activation rows per call (two 8-row MMA tiles)
ESC_E = 32                 # escapes per epilogue chunk (at least 4 per warp)

# D = A * B + C for one m16n8k16 tile; pack 2: A rows (g, g+8) of one K-slot pair, B's two K-slot
# pairs, C / D (token 2c, 2c+1) of row g and of row g + 8.
MMA_PTX = ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
           "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")


@dataclass(frozen=True)
class MmaConfig:
    """warps_k: warps splitting K inside a program; warps_r: 16-row blocks per program; ahead:
    1 = the plane loads issued one round ahead (a register double buffer), 2 = the x loads too,
    0 = neither; words: H words per lane and round (4: one 16-byte load per plane and row, 8:
    two); maxnreg: a register cap per thread for ptxas (0: none); split: programs per 16 WR
    rows splitting K into runs of whole rounds (split-K: fp32 partials in a workspace, the last
    program to finish sums them in split order), so that a layer with few row blocks still
    fills the GPU and its last programs are short; esc_pre: 0 = the escapes' exact products
    before the main loop (their loads waiting while the first round streams), n > 0 = the range
    and the first n chunks of entries loaded before the main loop (constant: before the PDL
    wait) and every product after it; esc_mma: 1 = instead, the escapes as tensor-core MMAs
    before the main loop (``_esc_mma``: 16 entries per m16n8k16 step and warp, their exact
    values in the A operand at their rows, x gathered at their columns in B; the first chunk's
    entries loaded before the PDL wait), esc_pre then unused."""
    warps_k: int = 4
    warps_r: int = 1
    ahead: int = 1
    words: int = 4
    maxnreg: int = 0
    split: int = 1
    esc_pre: int = 0
    esc_mma: int = 0

    def __post_init__(self):
        if (self.warps_k < 1 or self.warps_r < 1 or self.ahead not in (0, 1, 2)
                or self.words not in (4, 8) or self.maxnreg < 0 or self.split < 1
                or self.esc_pre not in (0, 1, 2, 4) or self.esc_mma not in (0, 1)
                or (self.esc_mma and self.esc_pre)):
            raise ValueError(f"MmaConfig: bad values {self}")

    @property
    def short(self) -> str:
        reg = f"g{self.maxnreg}" if self.maxnreg else ""
        split = f"x{self.split}" if self.split > 1 else ""
        esc = f"e{self.esc_pre}" if self.esc_pre else "m" if self.esc_mma else ""
        return f"k{self.warps_k}r{self.warps_r}a{self.ahead}s{self.words}{reg}{split}{esc}"


def round_words(cfg: MmaConfig) -> int:
    """H words (4 pair columns each) one iteration of a program's warps covers."""
    return 4 * cfg.words * cfg.warps_k


def split_plan(cfg: MmaConfig, K: int) -> tuple:
    """(rounds per program, programs per row block) of cfg on K columns: cfg.split runs of
    whole rounds, fewer where K has fewer rounds (no empty program)."""
    rounds = _cdiv(_cdiv(K, 32) * 32 // 8, round_words(cfg))
    rps = _cdiv(rounds, cfg.split)
    return rps, _cdiv(rounds, rps)


def candidates(N: int, K: int, n_sm: int) -> tuple:
    """The tuning space for an N x K weight on a GPU of n_sm SMs: CANDIDATES, and where the
    row blocks are few (<= SPLIT_MAX_BLOCKS_PER_SM * n_sm), for the first SPLIT_BASES bases the
    splits of SPLITS that give each program >= 2 rounds, a plan of their own and at most
    MAX_PROGRAMS_PER_SM * n_sm programs; each of them also with the escapes after the main loop
    (esc_pre ESC_PRE) and as MMAs (esc_mma 1)."""
    out = []
    for i, base in enumerate(CANDIDATES):
        out += [base, replace(base, esc_pre=ESC_PRE), replace(base, esc_mma=1)]
        seen = {split_plan(base, K)}
        blocks = _cdiv(N, 16 * base.warps_r)
        few = blocks <= SPLIT_MAX_BLOCKS_PER_SM * n_sm
        for split in SPLITS[1:] if i < SPLIT_BASES and few else ():
            cfg = replace(base, split=split)
            plan = split_plan(cfg, K)
            if plan not in seen and plan[0] >= 2 and blocks * plan[1] <= MAX_PROGRAMS_PER_SM * n_sm:
                seen.add(plan)
                out += [cfg, replace(cfg, esc_pre=ESC_PRE), replace(cfg, esc_mma=1)]
    return tuple(out)


def mma_supported(M: int, K: int) -> bool:
    """Whether ``w12_matmul`` may route x [M, K] here: Gluon present, 1 <= M <= MAX_M and
    K % 8 == 0 (16-byte activation rows)."""
    return HAS_GLUON and 1 <= M <= MAX_M and K % 8 == 0


if HAS_GLUON:
    _DECODE = gl.constexpr(DECODE_PTX)
    # a CTA barrier: thread_barrier in triton 3.6 (the GPU machine's), barrier from 3.7 on
    _barrier = getattr(gl, "thread_barrier", None) or gl.barrier
    _MMA = gl.constexpr(MMA_PTX)

    @gluon.jit
    def _i5(n: gl.constexpr, d: gl.constexpr, L: gl.constexpr):
        """arange(n) along dimension d of the rank-5 layout L, broadcastable to it (the outermost
        slice is the first dimension the indexing expands)."""
        if d == 0:
            r = gl.arange(0, n, layout=gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(
                3, gl.SliceLayout(4, L)))))[:, None, None, None, None]
        elif d == 1:
            r = gl.arange(0, n, layout=gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(
                3, gl.SliceLayout(4, L)))))[None, :, None, None, None]
        elif d == 2:
            r = gl.arange(0, n, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(
                3, gl.SliceLayout(4, L)))))[None, None, :, None, None]
        elif d == 3:
            r = gl.arange(0, n, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(
                2, gl.SliceLayout(4, L)))))[None, None, None, :, None]
        else:
            r = gl.arange(0, n, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(
                2, gl.SliceLayout(3, L)))))[None, None, None, None, :]
        return r

    @gluon.jit
    def _i4(n: gl.constexpr, d: gl.constexpr, L: gl.constexpr):
        """arange(n) along dimension d of the rank-4 layout L, broadcastable to it."""
        if d == 0:
            r = gl.arange(0, n, layout=gl.SliceLayout(1, gl.SliceLayout(
                2, gl.SliceLayout(3, L))))[:, None, None, None]
        elif d == 1:
            r = gl.arange(0, n, layout=gl.SliceLayout(0, gl.SliceLayout(
                2, gl.SliceLayout(3, L))))[None, :, None, None]
        elif d == 2:
            r = gl.arange(0, n, layout=gl.SliceLayout(0, gl.SliceLayout(
                1, gl.SliceLayout(3, L))))[None, None, :, None]
        else:
            r = gl.arange(0, n, layout=gl.SliceLayout(0, gl.SliceLayout(
                1, gl.SliceLayout(2, L))))[None, None, None, :]
        return r

    @gluon.jit
    def _i3(n: gl.constexpr, d: gl.constexpr, L: gl.constexpr):
        """arange(n) along dimension d of the rank-3 layout L, broadcastable to it."""
        if d == 0:
            r = gl.arange(0, n, layout=gl.SliceLayout(1, gl.SliceLayout(2, L)))[:, None, None]
        elif d == 1:
            r = gl.arange(0, n, layout=gl.SliceLayout(0, gl.SliceLayout(2, L)))[None, :, None]
        else:
            r = gl.arange(0, n, layout=gl.SliceLayout(0, gl.SliceLayout(1, L)))[None, None, :]
        return r

    @gluon.jit
    def _load_planes(hrow, lrow, row_ok, q, HW, lim):
        """One round's plane words: H words q and L words q, HW + q of the thread's rows (from
        lim, the end of the program's K range, or past the last row: words that decode to +0)."""
        ok = row_ok & (q < lim)
        h = gl.load(hrow + q, mask=ok, other=0x77777777)   # code 7, L 0: decodes to +0
        la = gl.load(lrow + q, mask=ok, other=0)
        lb = gl.load(lrow + HW + q, mask=ok, other=0)
        return h, la, lb

    @gluon.jit
    def _load_round(hrow, lrow, row_ok, q, wrow, row_okb, qb, HW, lim, BF16: gl.constexpr):
        """One round's weight words: the planes (_load_planes: h, la, lb) or, BF16, the bf16
        words qb (first half) and 2 HW + qb (second half) of the thread's rows as (la, la, lb)
        (0 from word 2 lim on or past the last row)."""
        if BF16:
            ok = row_okb & (qb < 2 * lim)
            la = gl.load(wrow + qb, mask=ok, other=0)
            lb = gl.load(wrow + 2 * HW + qb, mask=ok, other=0)
            h = la
        else:
            h, la, lb = _load_planes(hrow, lrow, row_ok, q, HW, lim)
        return h, la, lb

    @gluon.jit
    def _load_x(xrow0, xrow1, tok_ok0, tok_ok1, xq, HW, KW, lim, NT: gl.constexpr):
        """One round's x words: xq (first half) and 2 HW + xq (second half) of activation rows
        tok and, with NT 2, tok + 8 (else the first two again); 0 from H word lim on (the end
        of the program's K range: a last partial round) or past K."""
        inr = xq < 2 * lim
        ka = inr & (xq < KW)
        kb = inr & (2 * HW + xq < KW)
        xa = gl.load(xrow0 + xq, mask=tok_ok0 & ka, other=0)
        xb = gl.load(xrow0 + 2 * HW + xq, mask=tok_ok0 & kb, other=0)
        if NT == 2:
            xa1 = gl.load(xrow1 + xq, mask=tok_ok1 & ka, other=0)
            xb1 = gl.load(xrow1 + 2 * HW + xq, mask=tok_ok1 & kb, other=0)
        else:
            xa1 = xa
            xb1 = xb
        return xa, xb, xa1, xb1

    @gluon.jit
    def _x_operand(xv, S: gl.constexpr, Q: gl.constexpr):
        """[WK, 8WR, 4, 2S] x words (word 2s + parity) -> [WK, 8WR, 2, 4, S] in Q (registers
        renamed only)."""
        WK: gl.constexpr = xv.shape[0]
        G8: gl.constexpr = xv.shape[1]
        v = gl.permute(gl.reshape(xv, [WK, G8, 4, S, 2]), [0, 1, 4, 2, 3])
        return gl.convert_layout(v, Q, assert_trivial=True)

    @gluon.jit
    def _decode(la, lb, h, hbw):
        """DECODE_PTX on a round's plane words: the A words of the first half's slot pairs
        (alo, ahi) and of the second half's (blo, bhi), in the planes' layout."""
        return gl.inline_asm_elementwise(_DECODE, "=r,=r,=r,=r,r,r,r,r", [la, lb, h, hbw],
                                         dtype=(gl.int32, gl.int32, gl.int32, gl.int32),
                                         is_pure=True, pack=1)

    @gluon.jit
    def _round_mmas(alo, ahi, blo, bhi, xa, xb, xa1, xb1, acc01, acc23, bcc01, bcc23, zero,
                    S: gl.constexpr, Q: gl.constexpr, NT: gl.constexpr):
        """A round's MMAs: both halves' A words (moved to Q: register renames) against x of
        the first 8-token tile and, with NT >= 2, the second (ws.py's NT 4 calls this once per
        16-token half); each step starts from zero and the steps are summed into the [.., 4]
        accumulators (acc: first tile, bcc: second)."""
        alo = gl.convert_layout(alo, Q)
        ahi = gl.convert_layout(ahi, Q)
        blo = gl.convert_layout(blo, Q)
        bhi = gl.convert_layout(bhi, Q)
        d01, d23 = _mma(alo, ahi, _x_operand(xa, S, Q), zero, zero)
        d01, d23 = _mma(blo, bhi, _x_operand(xb, S, Q), d01, d23)
        acc01 += gl.sum(d01, axis=4)
        acc23 += gl.sum(d23, axis=4)
        if NT >= 2:
            d01, d23 = _mma(alo, ahi, _x_operand(xa1, S, Q), zero, zero)
            d01, d23 = _mma(blo, bhi, _x_operand(xb1, S, Q), d01, d23)
            bcc01 += gl.sum(d01, axis=4)
            bcc23 += gl.sum(d23, axis=4)
        return acc01, acc23, bcc01, bcc23

    @gluon.jit
    def _mma(alo, ahi, xb, c01, c23):
        return gl.inline_asm_elementwise(_MMA, "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f",
                                         [alo, ahi, xb, c01, c23],
                                         dtype=(gl.float32, gl.float32), is_pure=True, pack=2)

    @gluon.jit
    def _w12_mma_kernel(x_ptr, x16_ptr, y_ptr, ws_ptr, lock_ptr, l_ptr, h_ptr, hb_ptr, koff_ptr,
                        kent_ptr, kval_ptr, M, N, KW, HW, G, sxm, sym, RPS,
                        WK: gl.constexpr, WR: gl.constexpr, NT: gl.constexpr, S: gl.constexpr,
                        AHEAD: gl.constexpr, HB_PER_ROW: gl.constexpr, ESC: gl.constexpr,
                        USE_SPLIT: gl.constexpr, P: gl.constexpr, Q: gl.constexpr,
                        X: gl.constexpr, E4: gl.constexpr, EC: gl.constexpr,
                        EP: gl.constexpr, E4P: gl.constexpr, BF16: gl.constexpr,
                        PB: gl.constexpr, EM: gl.constexpr = 0, QE: gl.constexpr = None,
                        EL: gl.constexpr = None, PDL: gl.constexpr = 0):
        # x_ptr: int32 view of x [M, K] bf16 (sxm in int32 words); l_ptr / h_ptr: int32 views of
        # the planes (rows of 2*HW / HW words); y_ptr: bf16 [M, N] (row stride sym). Grid
        # (row blocks, splits): program (pid, pid_k) runs rounds [pid_k RPS, (pid_k + 1) RPS) of
        # its rows; USE_SPLIT: ws_ptr fp32 [splits, M, N] partials, lock_ptr a zeroed ticket
        # counter per row block (left at zero). PDL (kernels/pdl.py, as the GEMV's): the next
        # kernel may launch at the start (1), after the main loop (2) or after the wait (3); the
        # plane loads of the first round (constant weights) come before the wait, x and every
        # write after it. Escapes: with EP == 0 their exact products before the main loop; with
        # EP > 0 the range and the first EP entries (constant) loaded before the wait and every
        # product after the main loop. BF16: l_ptr is an int32 view of a bf16 weight [N, K]
        # (rows of 4 HW words, HW = K / 8; no planes, bases or escapes): a thread loads, per H
        # word of the W12 form, the same columns' bf16 words (layout PB: 2S words per half and
        # row), which are the MMA's A registers as they are. EM: the escapes by _esc_mma (layouts
        # QE, EL) before the main loop, their first chunk's entries loaded before the wait.
        _gdc_launch_dependents(PDL == 1)
        pid = gl.program_id(0)
        pid_k = gl.program_id(1)
        n0 = pid * (16 * WR)
        w = _i5(WK, 0, P)
        gg = _i5(8 * WR, 1, P)
        pr = _i5(2, 2, P)
        c = _i5(4, 3, P)
        s = _i5(S, 4, P)
        row = n0 + 16 * (gg // 8) + 2 * (gg % 8) + pr                 # [1, 8WR, 2, 1, 1]
        row_ok = row < N
        hrow = h_ptr + row.to(gl.int64) * HW
        lrow = l_ptr + row.to(gl.int64) * (2 * HW)
        q0 = (4 * S) * w + S * c + s                                  # [WK, 1, 1, 4, S]
        SHAPE: gl.constexpr = [WK, 8 * WR, 2, 4, S]
        if BF16:
            hbw = gl.zeros(SHAPE, gl.int32, P)                         # not read
            rowb = n0 + 16 * (_i5(8 * WR, 1, PB) // 8) + 2 * (_i5(8 * WR, 1, PB) % 8) + _i5(
                2, 2, PB)
            wrow = l_ptr + rowb.to(gl.int64) * (4 * HW)
            row_okb = rowb < N
            # words 2q, 2q + 1 of each half for the thread's S H words q
            qb0 = 2 * ((4 * S) * _i5(WK, 0, PB) + S * _i5(4, 3, PB)) + _i5(2 * S, 4, PB)
        elif HB_PER_ROW:
            hbw = gl.load(hb_ptr + row * 4, mask=row_ok, other=0) + gl.zeros(SHAPE, gl.int32, P)
        else:
            hbw = gl.load(hb_ptr).to(gl.int32) * 0x01010101 + gl.zeros(SHAPE, gl.int32, P)
        if not BF16:   # the bf16 names unused
            wrow = lrow
            row_okb = row_ok
            qb0 = q0

        # activation side: a thread's 2S x words of a half are contiguous (vector loads in X),
        # then seen as [.., parity, c, s] in Q (word 2s + parity: the B registers of step s)
        xw = _i4(WK, 0, X)
        xg = _i4(8 * WR, 1, X)
        xc = _i4(4, 2, X)
        xt = _i4(2 * S, 3, X)
        xq0 = 2 * ((4 * S) * xw + S * xc) + xt                        # [WK, 1, 4, 2S]
        tok0 = xg % 8
        xrow0 = x_ptr + tok0 * sxm
        tok_ok0 = tok0 < M
        xrow1 = x_ptr + (tok0 + 8) * sxm
        tok_ok1 = (tok0 + 8) < M
        ACC: gl.constexpr = gl.SliceLayout(4, Q)
        R: gl.constexpr = gl.SliceLayout(0, ACC)
        # each round's MMA steps start from zero and are summed into [.., 4] (one chain per
        # step across rounds, with no sums in the loop, measured 1-3% slower per token:
        # docs/benchmarks/w12.md, session 35)
        zero = gl.zeros(SHAPE, gl.float32, Q)
        acc01 = gl.zeros([WK, 8 * WR, 2, 4], gl.float32, ACC)
        acc23 = gl.zeros([WK, 8 * WR, 2, 4], gl.float32, ACC)
        bcc01 = gl.zeros([WK, 8 * WR, 2, 4], gl.float32, ACC)
        bcc23 = gl.zeros([WK, 8 * WR, 2, 4], gl.float32, ACC)

        step = 4 * S * WK
        k0 = pid_k * RPS * step                     # the program's K range: H words [k0, lim)
        lim = gl.minimum(k0 + RPS * step, HW)
        n_iter = gl.cdiv(lim - k0, step)
        if AHEAD >= 1:
            h, la, lb = _load_round(hrow, lrow, row_ok, k0 + q0, wrow, row_okb, 2 * k0 + qb0,
                                    HW, lim, BF16)
        if ESC and (EP > 0 or EM):   # all of the rows' escapes (every K), first split only
            elo, ehi = _esc_range(koff_ptr, n0, N, G, WR)
            ehi = elo + (ehi - elo) * (pid_k == 0).to(gl.int32)
            if EM:   # (MmaConfig refuses esc_mma with esc_pre: EP is 0 then)
                ek = _esc_mma_entries(kent_ptr, kval_ptr, elo, ehi, 0, n0, WK, WR, EL)
            else:
                ent, ev, eok = _esc_entries(kent_ptr, kval_ptr, elo, ehi, E4P, EP)
        _gdc_wait(PDL > 0)
        _gdc_launch_dependents(PDL == 3)
        if AHEAD >= 2:
            xa, xb, xa1, xb1 = _load_x(xrow0, xrow1, tok_ok0, tok_ok1, 2 * k0 + xq0, HW, KW, lim,
                                       NT)
        # the escapes' exact products first: their loads wait while the first round streams
        og = _i3(8 * WR, 0, R)
        op = _i3(2, 1, R)
        oc = _i3(4, 2, R)
        orow = n0 + 16 * (og // 8) + 2 * (og % 8)                       # row of r01; r23: + 1
        otok = 2 * oc + op
        e01 = gl.zeros([8 * WR, 2, 4], gl.float32, R)
        e23 = gl.zeros([8 * WR, 2, 4], gl.float32, R)
        f01 = gl.zeros([8 * WR, 2, 4], gl.float32, R)
        f23 = gl.zeros([8 * WR, 2, 4], gl.float32, R)
        if ESC and EM:   # the escapes' exact products into the accumulators, before the loop
            acc01, acc23, bcc01, bcc23 = _esc_mma(acc01, acc23, bcc01, bcc23, ek, kent_ptr,
                                                  kval_ptr, x16_ptr, sxm, elo, ehi, n0, M, WK,
                                                  WR, NT, QE, EL)
        elif ESC and EP == 0:
            if pid_k == 0:   # all of the rows' escapes (every K) in the first split
                e01, e23 = _escapes(e01, e23, 0, x16_ptr, sxm, koff_ptr, kent_ptr, kval_ptr,
                                    n0, N, M, G, WR, E4, EC)
                if NT == 2:
                    f01, f23 = _escapes(f01, f23, 8, x16_ptr, sxm, koff_ptr, kent_ptr,
                                        kval_ptr, n0, N, M, G, WR, E4, EC)
        for i in range(n_iter):
            j = k0 + i * step
            if AHEAD >= 1:
                h2, la2, lb2 = _load_round(hrow, lrow, row_ok, j + step + q0, wrow, row_okb,
                                           2 * (j + step) + qb0, HW, lim, BF16)
            else:
                h, la, lb = _load_round(hrow, lrow, row_ok, j + q0, wrow, row_okb, 2 * j + qb0,
                                        HW, lim, BF16)
            if AHEAD >= 2:
                xa2, xb2, xc2, xd2 = _load_x(xrow0, xrow1, tok_ok0, tok_ok1,
                                             2 * (j + step) + xq0, HW, KW, lim, NT)
            else:
                xa, xb, xa1, xb1 = _load_x(xrow0, xrow1, tok_ok0, tok_ok1, 2 * j + xq0, HW, KW,
                                           lim, NT)
            if BF16:   # la / lb: the halves' words, 2 per H word (its first and second pair)
                alo, ahi = gl.split(gl.reshape(la, [WK, 8 * WR, 2, 4, S, 2]))
                blo, bhi = gl.split(gl.reshape(lb, [WK, 8 * WR, 2, 4, S, 2]))
            else:
                alo, ahi, blo, bhi = _decode(la, lb, h, hbw)
            acc01, acc23, bcc01, bcc23 = _round_mmas(alo, ahi, blo, bhi, xa, xb, xa1, xb1,
                                                     acc01, acc23, bcc01, bcc23, zero, S, Q, NT)
            if AHEAD >= 1:
                h, la, lb = h2, la2, lb2
            if AHEAD >= 2:
                xa, xb, xa1, xb1 = xa2, xb2, xc2, xd2
        _gdc_launch_dependents(PDL == 2)
        if ESC and EP > 0:   # the entries loaded ahead, then any further ones EC at a time
            e01, e23 = _esc_products(e01, e23, 0, x16_ptr, sxm, ent, ev, eok, n0, M, WR, E4P)
            if NT == 2:
                f01, f23 = _esc_products(f01, f23, 8, x16_ptr, sxm, ent, ev, eok, n0, M, WR,
                                         E4P)
            for e0 in range(elo + EP, ehi, EC):
                ent2, ev2, eok2 = _esc_entries(kent_ptr, kval_ptr, e0, ehi, E4, EC)
                e01, e23 = _esc_products(e01, e23, 0, x16_ptr, sxm, ent2, ev2, eok2, n0, M, WR,
                                         E4)
                if NT == 2:
                    f01, f23 = _esc_products(f01, f23, 8, x16_ptr, sxm, ent2, ev2, eok2, n0, M,
                                             WR, E4)

        # reduce over the warps (w): [8WR, 2, 4] per accumulator
        r01 = gl.sum(acc01, axis=0) + e01
        r23 = gl.sum(acc23, axis=0) + e23
        if NT == 2:
            s01 = gl.sum(bcc01, axis=0) + f01
            s23 = gl.sum(bcc23, axis=0) + f23
        else:   # not stored
            s01 = r01
            s23 = r23
        if USE_SPLIT:
            mn = M * N                          # M == 1 arrives as a constant
            ws_k = ws_ptr + pid_k.to(gl.int64) * mn
            _store_pair(ws_k, N, r01, r23, otok, orow, M, N)
            if NT == 2:
                _store_pair(ws_k, N, s01, s23, otok + 8, orow, M, N)
            _barrier()   # every thread's partial is written before the ticket is taken
            ticket = gl.atomic_add(lock_ptr + pid, 1, sem="acq_rel", scope="gpu")
            if ticket == gl.num_programs(1) - 1:   # the last of the row block's programs
                r01, r23 = _load_pair(ws_ptr, N, otok, orow, M, N)
                if NT == 2:
                    s01, s23 = _load_pair(ws_ptr, N, otok + 8, orow, M, N)
                for sp in range(1, gl.num_programs(1)):
                    ws_s = ws_ptr + sp.to(gl.int64) * mn
                    a01, a23 = _load_pair(ws_s, N, otok, orow, M, N)
                    r01 += a01
                    r23 += a23
                    if NT == 2:
                        a01, a23 = _load_pair(ws_s, N, otok + 8, orow, M, N)
                        s01 += a01
                        s23 += a23
                _store_y(y_ptr, sym, r01, r23, s01, s23, otok, orow, M, N, NT)
                gl.atomic_xchg(lock_ptr + pid, 0)
        else:
            _store_y(y_ptr, sym, r01, r23, s01, s23, otok, orow, M, N, NT)

    @gluon.jit
    def _gdc_wait(ON: gl.constexpr):
        """griddepcontrol.wait (pdl.wait) when ON."""
        if ON:
            gl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32,
                                      is_pure=False, pack=1)

    @gluon.jit
    def _gdc_launch_dependents(ON: gl.constexpr):
        """griddepcontrol.launch_dependents (pdl.launch_dependents) when ON."""
        if ON:
            gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [],
                                      dtype=gl.int32, is_pure=False, pack=1)

    @gluon.jit
    def _store_pair(p, stride, v01, v23, tok, row, M, N):
        """v01 at [tok, row] and v23 at [tok, row + 1] of p (row stride ``stride``), masked to
        M x N."""
        gl.store(p + tok * stride + row, v01, mask=(tok < M) & (row < N))
        gl.store(p + tok * stride + row + 1, v23, mask=(tok < M) & (row + 1 < N))

    @gluon.jit
    def _load_pair(p, stride, tok, row, M, N):
        """What _store_pair stored (from L2: other programs wrote it); 0 outside M x N."""
        a = gl.load(p + tok * stride + row, mask=(tok < M) & (row < N), other=0.0,
                    cache_modifier=".cg")
        b = gl.load(p + tok * stride + row + 1, mask=(tok < M) & (row + 1 < N), other=0.0,
                    cache_modifier=".cg")
        return a, b

    @gluon.jit
    def _store_y(y_ptr, sym, r01, r23, s01, s23, otok, orow, M, N, NT: gl.constexpr):
        """The output rows: activation rows otok (r) and, with NT 2, otok + 8 (s), as bf16."""
        _store_pair(y_ptr, sym, r01.to(gl.bfloat16), r23.to(gl.bfloat16), otok, orow, M, N)
        if NT == 2:
            _store_pair(y_ptr, sym, s01.to(gl.bfloat16), s23.to(gl.bfloat16), otok + 8, orow,
                        M, N)

    @gluon.jit
    def _esc_range(koff_ptr, n0, N, G, WR: gl.constexpr):
        """[lo, hi): the entries of rows [n0, n0 + 16 WR) in the 16-row escape index, all K."""
        b0 = n0 // 16
        lo = gl.load(koff_ptr + b0 * G)
        hi = gl.load(koff_ptr + gl.minimum(b0 + WR, gl.cdiv(N, 16)) * G)
        return lo, hi

    @gluon.jit
    def _esc_entries(kent_ptr, kval_ptr, e0, hi, E4: gl.constexpr, EC: gl.constexpr):
        """Entries [e0, min(e0 + EC, hi)): (kent, kval, valid) as [EC] in E4's slice (one load
        per entry and thread: broadcast to [EC, 8WR, 2, 4] only in _esc_products)."""
        e = gl.arange(0, EC, layout=gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, E4))))
        ok = e0 + e < hi
        ent = gl.load(kent_ptr + e0 + e, mask=ok, other=0)
        v = gl.load(kval_ptr + e0 + e, mask=ok, other=0)
        return ent, v, ok

    @gluon.jit
    def _esc_products(r01, r23, tok0, x16_ptr, sxm, ent, v, ok, n0, M, WR: gl.constexpr,
                      E4: gl.constexpr):
        """r01 / r23 ([8WR, 2, 4]: rows n0 + 16 (g // 8) + 2 (g % 8) and that + 1, activation row
        tok0 + 2c + p) plus the exact products of the entries (ent, v, ok) of _esc_entries, as
        [EC, 8WR, 2, 4] products reduced over the entries."""
        R: gl.constexpr = r01.type.layout
        g = _i4(8 * WR, 1, E4)
        p = _i4(2, 2, E4)
        c = _i4(4, 3, E4)
        lrow = 16 * (g // 8) + 2 * (g % 8)                          # [1, 8WR, 1, 1]
        tok = tok0 + 2 * c + p                                      # [1, 1, 2, 4]
        ent = ent[:, None, None, None]
        r = (((ent >> 24) & 0xFF) - n0 % 256) & 255                 # row in the program
        col = ent & 0xFFFFFF
        xv = gl.load(x16_ptr + tok * (2 * sxm) + col, mask=ok[:, None, None, None] & (tok < M),
                     other=0.0)
        w = v.to(gl.bfloat16, bitcast=True).to(gl.float32)[:, None, None, None]
        add = xv.to(gl.float32) * w                                 # exact (bf16 x bf16)
        a01 = gl.sum(gl.where(lrow == r, add, 0.0), axis=0)
        a23 = gl.sum(gl.where(lrow + 1 == r, add, 0.0), axis=0)
        return r01 + gl.convert_layout(a01, R), r23 + gl.convert_layout(a23, R)

    @gluon.jit
    def _escapes(r01, r23, tok0, x16_ptr, sxm, koff_ptr, kent_ptr, kval_ptr, n0, N, M, G,
                 WR: gl.constexpr, E4: gl.constexpr, EC: gl.constexpr):
        """r01 / r23 plus the exact products of the escapes of rows [n0, n0 + 16 WR), all K (one
        range of the 16-row escape index), taken EC at a time."""
        lo, hi = _esc_range(koff_ptr, n0, N, G, WR)
        for e0 in range(lo, hi, EC):
            ent, v, ok = _esc_entries(kent_ptr, kval_ptr, e0, hi, E4, EC)
            r01, r23 = _esc_products(r01, r23, tok0, x16_ptr, sxm, ent, v, ok, n0, M, WR, E4)
        return r01, r23

    @gluon.jit
    def _esc_mma_entries(kent_ptr, kval_ptr, elo, ehi, t, n0, WK: gl.constexpr, WR: gl.constexpr,
                         EL: gl.constexpr):
        """Chunk t of the escape MMAs: warp (w, r) takes entries elo + 16 (w + WK t) + k of
        [elo, ehi). As [WK, 8WR, 2, 4, 2] tensors in EL, (slot pair h, lane c, j): A side (lo:
        k = 2c + j, hi: k = 8 + 2c + j, the same for both h) and B side (k = 8h + 2c + j):
        (row of the entry in the warp's 16-row block (out of [0, 16) where not its block),
        value bits, valid) for lo and hi, and the columns of B's entries."""
        w = _i5(WK, 0, EL)
        gg = _i5(8 * WR, 1, EL)
        h = _i5(2, 2, EL)
        k = 2 * _i5(4, 3, EL) + _i5(2, 4, EL) + 0 * h + 0 * gg        # [1, 8WR, 2, 4, 2]
        e = elo + 16 * (w + WK * t) + k
        ok_lo = e < ehi
        ok_hi = e + 8 < ehi
        ent_lo = gl.load(kent_ptr + e, mask=ok_lo, other=0)
        ent_hi = gl.load(kent_ptr + e + 8, mask=ok_hi, other=0)
        v_lo = gl.load(kval_ptr + e, mask=ok_lo, other=0).to(gl.int32) & 0xFFFF
        v_hi = gl.load(kval_ptr + e + 8, mask=ok_hi, other=0).to(gl.int32) & 0xFFFF
        base = 16 * (gg // 8) + n0 % 256                             # the warp's block, mod 256
        r_lo = (((ent_lo >> 24) & 0xFF) - base) & 255
        r_hi = (((ent_hi >> 24) & 0xFF) - base) & 255
        col = gl.where(h == 0, ent_lo, ent_hi) & 0xFFFFFF
        okb = gl.where(h == 0, ok_lo, ok_hi)
        return r_lo, v_lo, ok_lo, r_hi, v_hi, ok_hi, col, okb

    @gluon.jit
    def _pack_j(v, QE: gl.constexpr):
        """[.., 2] 16-bit values (int32) -> [.., 1] bf16x2 words (j = 0 low) in QE."""
        a, b = gl.split(v)
        return gl.convert_layout(gl.expand_dims(a | (b << 16), 4), QE)

    @gluon.jit
    def _esc_a(r, v, ok, WR: gl.constexpr, EL: gl.constexpr, QE: gl.constexpr,
               ROW8: gl.constexpr = False):
        """The A words of the escape MMA for one slot pair: at row slot g + 8 p (weight row
        2g + p of the warp's block; with ROW8, ws.py's slots, row g + 8 p) the entry's value
        where its row is that row, else 0."""
        gg = _i5(8 * WR, 1, EL) % 8
        p = _i5(2, 2, EL)
        if ROW8:
            row = gg + 8 * p
        else:
            row = 2 * gg + p
        return _pack_j(gl.where(ok & (r == row), v, 0), QE)

    @gluon.jit
    def _esc_operands(ek, x16_ptr, sxm, M, WR: gl.constexpr, NT: gl.constexpr,
                      QE: gl.constexpr, EL: gl.constexpr, ROW8: gl.constexpr = False):
        """A chunk's escape-MMA operands from its entries ek (_esc_mma_entries): the A words of
        both slot pairs (_esc_a) and x[tok0 + g, column of entry 8h + 2c + j] for the 8-token
        tiles (g = lane // 4, the B operand's token; taken from the layout, not from col's shape,
        whose row dimension may be a broadcast 1), as loaded: nothing reads them before
        _esc_apply, so ws.py can gather a chunk's x during its main loop."""
        r_lo, v_lo, ok_lo, r_hi, v_hi, ok_hi, col, okb = ek
        alo = _esc_a(r_lo, v_lo, ok_lo, WR, EL, QE, ROW8)
        ahi = _esc_a(r_hi, v_hi, ok_hi, WR, EL, QE, ROW8)
        tok = _i5(8 * WR, 1, EL) % 8
        xv0 = gl.load(x16_ptr + tok * (2 * sxm) + col, mask=okb & (tok < M), other=0.0)
        if NT >= 2:
            xv1 = gl.load(x16_ptr + (tok + 8) * (2 * sxm) + col, mask=okb & (tok + 8 < M),
                          other=0.0)
        else:
            xv1 = xv0
        return alo, ahi, xv0, xv1

    @gluon.jit
    def _esc_apply(acc01, acc23, bcc01, bcc23, ea, NT: gl.constexpr, QE: gl.constexpr):
        """A chunk's MMAs (operands ea from _esc_operands; x packed as bf16x2 B words) added to
        the [WK, 8WR, 2, 4, 1] sums (acc: first 8-token tile, bcc: second)."""
        alo, ahi, xv0, xv1 = ea
        xw0 = _pack_j(xv0.to(gl.int16, bitcast=True).to(gl.int32) & 0xFFFF, QE)
        acc01, acc23 = _mma(alo, ahi, xw0, acc01, acc23)
        if NT >= 2:
            xw1 = _pack_j(xv1.to(gl.int16, bitcast=True).to(gl.int32) & 0xFFFF, QE)
            bcc01, bcc23 = _mma(alo, ahi, xw1, bcc01, bcc23)
        return acc01, acc23, bcc01, bcc23

    @gluon.jit
    def _esc_mma_step(acc01, acc23, bcc01, bcc23, ek, x16_ptr, sxm, M, WR: gl.constexpr,
                      NT: gl.constexpr, QE: gl.constexpr, EL: gl.constexpr):
        """One chunk's MMAs (16 entries per warp) added to the [WK, 8WR, 2, 4, 1] sums."""
        return _esc_apply(acc01, acc23, bcc01, bcc23,
                          _esc_operands(ek, x16_ptr, sxm, M, WR, NT, QE, EL), NT, QE)

    @gluon.jit
    def _esc_mma(acc01, acc23, bcc01, bcc23, ek, kent_ptr, kval_ptr, x16_ptr, sxm, elo, ehi, n0,
                 M, WK: gl.constexpr, WR: gl.constexpr, NT: gl.constexpr, QE: gl.constexpr,
                 EL: gl.constexpr):
        """acc01 .. bcc23 ([WK, 8WR, 2, 4]) plus the exact products of the escapes of rows
        [n0, n0 + 16 WR), all K, as m16n8k16 MMAs (bf16 x bf16 products are exact in fp32): per
        warp and chunk 16 entries in A (their values at their rows, zero elsewhere) against x at
        their columns in B. ek: chunk 0's entries (_esc_mma_entries), loaded by the caller."""
        SH: gl.constexpr = [WK, 8 * WR, 2, 4, 1]
        e01 = gl.zeros(SH, gl.float32, QE)
        e23 = gl.zeros(SH, gl.float32, QE)
        f01 = gl.zeros(SH, gl.float32, QE)
        f23 = gl.zeros(SH, gl.float32, QE)
        e01, e23, f01, f23 = _esc_mma_step(e01, e23, f01, f23, ek, x16_ptr, sxm, M, WR, NT, QE, EL)
        for t in range(1, gl.cdiv(ehi - elo, 16 * WK)):
            ek2 = _esc_mma_entries(kent_ptr, kval_ptr, elo, ehi, t, n0, WK, WR, EL)
            e01, e23, f01, f23 = _esc_mma_step(e01, e23, f01, f23, ek2, x16_ptr, sxm, M, WR, NT,
                                               QE, EL)
        ACC: gl.constexpr = acc01.type.layout
        acc01 += gl.convert_layout(gl.sum(e01, axis=4), ACC)
        acc23 += gl.convert_layout(gl.sum(e23, axis=4), ACC)
        if NT == 2:
            bcc01 += gl.convert_layout(gl.sum(f01, axis=4), ACC)
            bcc23 += gl.convert_layout(gl.sum(f23, axis=4), ACC)
        return acc01, acc23, bcc01, bcc23


def esc_chunk(cfg: MmaConfig) -> int:
    """Escapes per epilogue chunk: ESC_E, or 4 per warp for programs of more than 8 warps."""
    return max(ESC_E, 4 * cfg.warps_k * cfg.warps_r)


def esc_layout(cfg: MmaConfig, entries: int):
    """The layout of [entries, 8 WR, 2, 4] escape products (entries a multiple of 4 per warp)."""
    nw = cfg.warps_k * cfg.warps_r
    return gl.BlockedLayout([entries // (4 * nw), 1, 2, 4], [4, 8, 1, 1], [nw, 1, 1, 1],
                            [3, 2, 1, 0])


def layouts(cfg: MmaConfig):
    """(P, Q, X, E4): the plane layout (16-byte runs per thread and row), the MMA-side layout
    (the same elements per thread, row / token parity fastest in registers), the x layout and
    the escape epilogue's layout ([esc_chunk, 8 WR, 2, 4])."""
    wk, wr = cfg.warps_k, cfg.warps_r
    S = cfg.words
    P = gl.BlockedLayout([1, 1, 2, 1, S], [1, 8, 1, 4, 1], [wk, wr, 1, 1, 1], [4, 3, 2, 1, 0])
    Q = gl.BlockedLayout([1, 1, 2, 1, S], [1, 8, 1, 4, 1], [wk, wr, 1, 1, 1], [2, 4, 3, 1, 0])
    X = gl.BlockedLayout([1, 1, 1, 2 * S], [1, 8, 4, 1], [wk, wr, 1, 1], [3, 2, 1, 0])
    return P, Q, X, esc_layout(cfg, esc_chunk(cfg))


def esc_mma_layouts(cfg: MmaConfig):
    """(QE, EL) of the escape MMAs (MmaConfig.esc_mma): QE is Q with one MMA step
    ([WK, 8 WR, 2, 4, 1]), EL the entries' [WK, 8 WR, 2, 4, 2] (the two halves of a bf16x2
    word last, in the thread)."""
    wk, wr = cfg.warps_k, cfg.warps_r
    QE = gl.BlockedLayout([1, 1, 2, 1, 1], [1, 8, 1, 4, 1], [wk, wr, 1, 1, 1], [2, 4, 3, 1, 0])
    EL = gl.BlockedLayout([1, 1, 2, 1, 2], [1, 8, 1, 4, 1], [wk, wr, 1, 1, 1], [4, 2, 3, 1, 0])
    return QE, EL


def bf16_layout(cfg: MmaConfig):
    """PB: a bf16 weight's words per thread ([WK, 8 WR, 2, 4, 2S]: 2S contiguous words per half
    and row, two per H word of the W12 form)."""
    return gl.BlockedLayout([1, 1, 2, 1, 2 * cfg.words], [1, 8, 1, 4, 1],
                            [cfg.warps_k, cfg.warps_r, 1, 1, 1], [4, 3, 2, 1, 0])


# the tuning space: the configs that won a layer of Qwen3.8-27B or Muse-Glimmer-30B at M = 1-8
# on the H200 (docs/benchmarks/w12.md, session 31), the first one the default
# (the 168-register cap of session 31 became 136 in session 36: with esc_mma ptxas fits k2r1a2s8
# in 136 without spills, 7 programs per SM instead of 6; Qwen3.8's gate_up 65.8 against 69.6 us
# at M = 2, the lm_heads 2-5% faster at M = 2-8)
CANDIDATES = (MmaConfig(2, 1, 2, 8), MmaConfig(2, 1, 1, 4), MmaConfig(2, 1, 2, 4),
              MmaConfig(2, 1, 2, 8, 136), MmaConfig(2, 1, 1, 8), MmaConfig(4, 1, 1, 8))
# split-K offered for the first SPLIT_BASES bases on weights of few row blocks: on the H200
# (session 32) a split won only at 320 and 544 row blocks (Qwen3.8's down, Muse's qkv) and cost
# 5-15% at >= 1030 (each split program pays a ticket and a workspace round trip); k2r1a2s4 split
# 2 won the down and o_proj layers at M = 16 by 8-12% (session 37)
SPLITS = (1, 2, 3, 4, 6, 8)
SPLIT_BASES = 3
SPLIT_MAX_BLOCKS_PER_SM = 5
MAX_PROGRAMS_PER_SM = 40
# the escape placement the tuner tries besides 0 for every candidate: on the H200 (session 33)
# esc_pre 1 won the lm_heads (6-7%), Qwen3.8's gate_up and Muse's qkv, and lost elsewhere
ESC_PRE = 1


def _tune_key(x: torch.Tensor, w) -> str:
    """Key in kernel's tune cache and file: "mma-" + w's kind (w12 / bf16), GPU model, M, N,
    K."""
    return _k.kind_tune_key(_k.MMA_KEY_PREFIX, x, w)


def mma_autotune(x: torch.Tensor, w, cands=None) -> MmaConfig:
    """Time the candidates on (x, w) as the GEMM's and GEMV's tuners do (CUDA-graph replays
    over a >= 512 MB ring of weight copies) and cache the fastest for (kind, GPU, M, N, K). ``w``:
    W12Planes (``w12_mma``, ``candidates`` and ``ws.candidates``: the winner may be a
    ``ws.WsConfig``) or a bf16 [N, K] weight (``bf16_mma``, ``bf16_candidates``)."""
    kind, N, K = _k.weight_kind(w)
    run = w12_mma if kind == "w12" else bf16_mma
    ring = _k.weight_ring(w)
    if not cands:
        M = x.shape[0]   # (17-32 rows: the warp-specialized kernel's candidates only)
        cands = () if M > MAX_M else (candidates if kind == "w12" else bf16_candidates)(
            N, K, _k._num_sms(x.device))
        if kind == "w12":   # and the warp-specialized kernel's, where it runs (sm_90)
            cands += _ws().candidates(M, N, K, x.device)
    best = _k.fastest(cands, lambda c: lambda i: run(x, ring[i], c), len(ring),
                      f"mma {kind} M={x.shape[0]} N={N} K={K}")
    _k._remember(_tune_key(x, w), best)
    return best


def tuned_config(x: torch.Tensor, w) -> MmaConfig:
    """The tuned config for (x, w) (in memory or from $SPECPILOT_W12_TUNE_FILE); else tuning now
    when ``kernel.autotune_enabled()`` (not while a CUDA graph is captured); else the default.
    ``w`` as ``mma_autotune``'s."""
    return _k.cached_or_tuned(_tune_key(x, w), lambda: mma_autotune(x, w), lambda: (
        CANDIDATES[0] if x.shape[0] <= MAX_M else _ws().CANDIDATES32[0]))


def _ws():
    """ws.py (imported late: it imports this module)."""
    from . import ws
    return ws


def bf16_mma_supported(M: int, K: int) -> bool:
    """Whether ``bf16_mma`` takes x [M, K]: Gluon present, 1 <= M <= MAX_M, K % 8 == 0."""
    return HAS_GLUON and 1 <= M <= MAX_M and K % 8 == 0


def bf16_candidates(N: int, K: int, n_sm: int) -> tuple:
    """The bf16 kernel's tuning space: ``candidates`` without the escape placements."""
    return tuple(c for c in candidates(N, K, n_sm) if not (c.esc_pre or c.esc_mma))


def bf16_mma(x: torch.Tensor, w: torch.Tensor, cfg: MmaConfig | None = None) -> torch.Tensor:
    """``x @ w^T`` (bf16 [M, N], fp32 accumulation) for bf16 x [M, K] and a bf16 weight [N, K],
    1 <= M <= 16: the W12 kernel's loop on bf16 words (no decode, no escapes), with PDL. Our
    fastest bf16 kernel at these rows, so the bf16 side of W12's measurements
    (``gpu_w12_mma_bench.py --bf16``); on a weight without escapes and K a multiple of 32 it
    equals ``w12_mma`` bit for bit. Not in the engine: at a verify's 8 / 16 rows it measured no
    faster than cuBLAS and a ``stock`` step with it slower (session 34,
    docs/benchmarks/hybrid.md). ``cfg``: default ``tuned_config`` (cfg.esc_pre has no effect)."""
    M, K = x.shape
    if w.dtype != torch.bfloat16 or w.dim() != 2 or w.shape[1] != K or x.dtype != torch.bfloat16:
        raise ValueError(f"bf16_mma: needs bf16 x [M, K] and bf16 w [N, K]; got x {x.dtype} "
                         f"{tuple(x.shape)}, w {w.dtype} {tuple(w.shape)}")
    if not (1 <= M <= MAX_M and K % 8 == 0):
        raise ValueError(f"bf16_mma: needs 1 <= M <= {MAX_M} and K % 8 == 0; got "
                         f"x {tuple(x.shape)}")
    if not HAS_GLUON:
        raise RuntimeError("bf16_mma needs Triton with Gluon (triton >= 3.5)")
    x, w = x.contiguous(), w.contiguous()
    cfg = cfg or tuned_config(x, w)
    wi = w.view(torch.int32)
    P, _, _, E4 = layouts(cfg)
    return _launch(x, w.shape[0], cfg, (wi,) * 6, K // 8, 1, "bf16", HB_PER_ROW=False,
                   ESC=False, EP=0, E4P=E4, BF16=True, PB=bf16_layout(cfg))


def _launch(x: torch.Tensor, N: int, cfg: MmaConfig, weight_args: tuple, HW: int, G: int,
            trigger: str, **consts) -> torch.Tensor:
    """Run _w12_mma_kernel on x [M, K] for N output columns: y, the split-K plan and workspace,
    the layouts and the PDL launch (pdl.GEMV_TRIGGER[trigger]); ``weight_args``: the six weight
    pointers (planes, bases, escape index), ``consts``: the weight's constexprs."""
    M, K = x.shape
    y = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)
    P, Q, X, E4 = layouts(cfg)
    QE, EL = esc_mma_layouts(cfg)
    rps, split = split_plan(cfg, K)
    blocks = _cdiv(N, 16 * cfg.warps_r)
    ws, locks = _k.split_buffers(y, split, blocks)
    _w12_mma_kernel[(blocks, split)](
        x.view(torch.int32), x, y, ws, locks, *weight_args,
        M, N, K // 2, HW, G, x.stride(0) // 2, y.stride(0), rps,
        WK=cfg.warps_k, WR=cfg.warps_r, NT=1 if M <= 8 else 2, S=cfg.words, AHEAD=cfg.ahead,
        USE_SPLIT=split > 1, P=P, Q=Q, X=X, E4=E4, EC=esc_chunk(cfg), QE=QE, EL=EL,
        **_pdl.launch_args(x, _pdl.GEMV_TRIGGER[trigger]), num_warps=cfg.warps_k * cfg.warps_r,
        **({"maxnreg": cfg.maxnreg} if cfg.maxnreg else {}), **consts)
    return y


def w12_mma(x: torch.Tensor, planes: W12Planes, cfg=None) -> torch.Tensor:
    """``x @ W^T`` (bf16 [M, N], fp32 accumulation) for bf16 x [M, K], 1 <= M <= 16, and 17-32
    rows where the warp-specialized kernel runs (``ws.MAX_M``; its candidates only). ``cfg``:
    default ``tuned_config``; a ``ws.WsConfig`` runs the warp-specialized kernel
    (``ws.w12_ws``) instead."""
    M, K = x.shape
    max_m = _ws().MAX_M if M > MAX_M and _ws().supported(M, K, x.device) else MAX_M
    if not (1 <= M <= max_m and K % 8 == 0) or K != planes.K:
        raise ValueError(f"w12_mma: needs 1 <= M <= {max_m}, K % 8 == 0 and K == the weight's "
                         f"({planes.K}); got x {tuple(x.shape)}")
    if not HAS_GLUON:
        raise RuntimeError("w12_mma needs Triton with Gluon (triton >= 3.5)")
    if planes.idx_rows != IDX_ROWS:
        raise ValueError(f"w12_mma reads the {IDX_ROWS}-row escape index")
    x = x.contiguous()
    cfg = cfg or tuned_config(x, planes)
    if not isinstance(cfg, MmaConfig):
        return _ws().w12_ws(x, planes, cfg)
    if M > MAX_M:
        raise ValueError(f"w12_mma: the register loop ({cfg}) takes at most {MAX_M} rows")
    P, _, _, _ = layouts(cfg)
    weight_args = (planes.L.view(torch.int32), planes.H.view(torch.int32),
                   planes.hb.view(torch.int32) if planes.per_row else planes.hb,
                   planes.koff, planes.kent, planes.kval)
    return _launch(x, planes.N, cfg, weight_args, planes.Kp // 8,
                   _cdiv(planes.Kp // 2, GROUP), "w12", HB_PER_ROW=planes.per_row,
                   ESC=planes.kent.numel() > 0, EP=esc_chunk(cfg) * cfg.esc_pre, EM=cfg.esc_mma,
                   E4P=esc_layout(cfg, esc_chunk(cfg) * max(cfg.esc_pre, 1)), BF16=False, PB=P)
