"""W12 GEMM on Hopper's warpgroup MMA (wgmma) for 17-128 activation rows.

Why: a ``stock`` or ``final`` verify runs batch x block rows per GEMM (8-128 on our settings).
The few-row kernel (``mma.py``, ``mma.sync``) holds x in every warp's registers, and at 16 rows
it is already below cuBLAS (docs/benchmarks/w12.md, session 37); above 16 rows the template GEMM
(``kernel._gemm_kernel``) runs at 0.54-0.66x of cuBLAS because its decoded tile goes through
shared memory as ``tl.dot``'s B operand. Here the roles are swapped (``y^T = W x^T``):

* The weight is wgmma's A operand, in registers. A warpgroup (4 warps) takes 64 weight rows;
  warp ``w`` rows ``16 w .. 16 w + 15``, thread ``(g, c)`` (lane ``4 g + c``) rows ``g`` and
  ``g + 8`` of them, and per round ``4 S`` contiguous bytes of each plane and row: columns
  ``j0 + 4 S c .. + 4 S`` of the first half (L), the same of the second half and of H.
  ``kernel.DECODE_PTX`` turns them into bf16 in the same registers, which are the A operand's
  registers once the MMA's K index is relabelled as in ``mma.py``: logical ``k = 16 s + 8 hi +
  2 c + lo`` of a round's half holds physical column ``4 S c + 4 s + 2 hi + lo`` (the layout
  change is a register renaming: ``convert_layout(..., assert_trivial=True)``, checked at
  compile time; ``scripts/gpu_w12_wgmma_probe.py``).
* x is the B operand, in shared memory, loaded once per program and round for all of the
  program's 64 x ``groups`` rows: each thread loads 16-byte runs of x in the physical column
  order, the registers are renamed into the logical order, and the tile is stored into a
  double-buffered NVMMA-swizzled buffer ([NT, 16 S] per half, NT = activation rows rounded up
  to a power of two).
* Per round: the next round's planes and x are loaded into registers, this round's planes are
  decoded, two asynchronous wgmmas (one per half, S k-steps each) run against the current
  buffer while the next x is stored into the other one, then the wgmmas are waited on and one
  CTA barrier makes the new buffer visible. The wait is within the round: a wgmma reads its A
  registers until it is waited on, and ptxas reused them for the next round's loads when the
  wait came a round later (an ``overlap`` variant, removed: wrong results on the H200, session
  39; ``test_w12_wgmma.py`` checks the SASS for it).
* ``bf16_wgmma``: the same loop on a bf16 weight's words (the A registers as loaded).

A ring of weight words in shared memory (cp.async) and 2-word rounds (``words`` 2) were measured
and removed in session 42: slower than this loop, and triton 3.6's ptxas crashed on some of
their configs (docs/w12.md, "Warpgroup-MMA kernel for 17-128 rows").

Escapes decode to signed zero; their exact products are added after the main loop as wgmmas of
16 entries (A: each entry's value at its row, 0 elsewhere; B: x at the entries' columns), as
``mma.py``'s ``esc_mma`` does with ``mma.sync``. Split-K across programs as in ``mma.py`` (an
fp32 workspace and a ticket; the last program sums in split order). Fast mode only.

GPU only, sm_90 (wgmma). Gluon has no interpreter: on CPU the tests compile the kernel for
sm_90 and check its code; the numerics run on the GPU (``test_w12_wgmma.py``, ``gpu`` tests).
Not routed by ``kernel.w12_matmul`` unless ``$SPECPILOT_W12_WGMMA=1``: on the H200 it is
1.01-1.16x faster than the template GEMM per token at 16-64 rows but 0.51-0.72x of cuBLAS bf16
(session 39; docs/w12.md, "Warpgroup-MMA kernel for 17-128 rows").
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

import torch

from ..kernels import pdl as _pdl
from . import kernel as _k
from .kernel import DECODE_PTX, GROUP, IDX_ROWS, W12Planes, _cdiv

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared, warpgroup_mma, warpgroup_mma_wait)
except ImportError:  # no Triton, or one without Gluon's Hopper module: supported() says False
    gluon = None
    gl = None

HAS_GLUON = gluon is not None
MIN_NT = 16                # wgmma's N is >= 8; triton 3.6's ptxas crashed (SIGSEGV) at NT 8
#                            with words 2 (no longer offered); rows <= 16 run mma.py anyway
MAX_M = 128                # activation rows per call (wgmma N up to 256; registers limit us)
ESC_CHUNK = 16             # escape entries per escape wgmma (one k16 step)
SMEM_LIMIT = 200 * 1024    # bytes of shared memory a config may take (the H200 has 227 KB per CTA)
ENV = "SPECPILOT_W12_WGMMA"   # "1": w12_matmul routes WGMMA_MIN_M..MAX_M rows here
KEY_PREFIX = "wg-"         # tune cache / file keys ("wg-w12|GPU|m..|n..|k..")


@dataclass(frozen=True)
class WgConfig:
    """groups: warpgroups per program (64 weight rows each; they share the x buffers); words:
    S, the bytes of each plane a thread loads per row and round are 4 S (S = 4: one 16-byte load
    per plane and row; 4 or 8 only: words 2 was never the fastest and crashed triton 3.6's ptxas
    at some specialisations, session 42); split: programs splitting K into runs of whole rounds
    (split-K through an fp32 workspace, as ``mma.MmaConfig.split``)."""
    groups: int = 1
    words: int = 4
    split: int = 1

    def __post_init__(self):
        if self.groups not in (1, 2) or self.words not in (4, 8) or self.split < 1:
            raise ValueError(f"WgConfig: bad values {self} (groups 1 / 2, words 4 / 8, "
                             f"split >= 1)")

    @property
    def short(self) -> str:
        return f"g{self.groups}s{self.words}" + (f"x{self.split}" if self.split > 1 else "")


def nt_for(M: int) -> int:
    """The B operand's width for M activation rows: the next power of two, at least MIN_NT."""
    nt = MIN_NT
    while nt < M:
        nt *= 2
    return nt


def round_cols(cfg: WgConfig) -> int:
    """Pair columns (columns of each half) one round covers: 4 threads x 4 S."""
    return 16 * cfg.words


def split_plan(cfg: WgConfig, K: int, bf16: bool = False) -> tuple:
    """(rounds per program, programs per row block) of cfg on K columns: a half of Kp / 2
    columns (K padded to format.PAD_K = 32), or of K / 2 for a bf16 weight, walked in rounds of
    ``round_cols``."""
    half = K // 2 if bf16 else _cdiv(K, 32) * 16
    rounds = _cdiv(half, round_cols(cfg))
    rps = _cdiv(rounds, cfg.split)
    return rps, _cdiv(rounds, rps)


def smem_bytes(cfg: WgConfig, M: int) -> int:
    """Shared memory of a program: the x buffers (2 buffers x 2 halves x [NT, 16 S] bf16) and
    the escape tile [NT, 16]."""
    nt = nt_for(M)
    return 2 * 2 * nt * round_cols(cfg) * 2 + nt * ESC_CHUNK * 2


def supported(M: int, K: int, device=None) -> bool:
    """Whether ``w12_wgmma`` takes x [M, K]: Gluon with Hopper's module, 1 <= M <= MAX_M,
    K % 8 == 0, and (with a device) a compute capability 9.x GPU."""
    if not (HAS_GLUON and 1 <= M <= MAX_M and K % 8 == 0):
        return False
    if device is not None:
        dev = torch.device(device)
        return dev.type == "cuda" and torch.cuda.get_device_capability(dev)[0] == 9
    return True


def enabled() -> bool:
    """Whether $SPECPILOT_W12_WGMMA routes 17-128 rows here (off by default)."""
    return os.environ.get(ENV, "0") == "1"


if HAS_GLUON:
    _DECODE = gl.constexpr(DECODE_PTX)
    _barrier = getattr(gl, "thread_barrier", None) or gl.barrier
    _IDX_ROWS = gl.constexpr(IDX_ROWS)
    _ESC_CHUNK = gl.constexpr(ESC_CHUNK)
    from .mma import _gdc_launch_dependents, _gdc_wait, _i4

    @gluon.jit
    def _i2(n: gl.constexpr, d: gl.constexpr, L: gl.constexpr):
        """arange(n) along dimension d of the rank-2 layout L, broadcastable to it."""
        if d == 0:
            r = gl.arange(0, n, layout=gl.SliceLayout(1, L))[:, None]
        else:
            r = gl.arange(0, n, layout=gl.SliceLayout(0, L))[None, :]
        return r

    @gluon.jit
    def _load_planes(lrow, hrow, row_ok, q, HW, lim):
        """One round's plane words of the thread's rows: H words q, L words q (first half) and
        HW + q (second half), q < lim (the end of the program's range); masked words decode to
        +0."""
        ok = row_ok & (q < lim)
        h = gl.load(hrow + q, mask=ok, other=0x77777777)   # code 7, L 0: +0
        la = gl.load(lrow + q, mask=ok, other=0)
        lb = gl.load(lrow + HW + q, mask=ok, other=0)
        return h, la, lb

    @gluon.jit
    def _load_round(lrow, hrow, row_ok, q, wrow, row_okb, qb, HW, lim4, BF16: gl.constexpr):
        """One round's weight words: the planes (``_load_planes``) or, BF16, the bf16 words
        qb (first half: words 2q, 2q + 1 of H word q's columns, 2 S contiguous per thread) and
        2 HW + qb (second half) as (la, la, lb), [.., S, 2]."""
        if BF16:
            ok = row_okb & (qb < 2 * lim4)
            la = gl.load(wrow + qb, mask=ok, other=0)
            lb = gl.load(wrow + 2 * HW + qb, mask=ok, other=0)
            SH: gl.constexpr = [la.shape[0], la.shape[1], la.shape[2], la.shape[3] // 2, 2]
            la = gl.reshape(la, SH)
            lb = gl.reshape(lb, SH)
            h = la
        else:
            h, la, lb = _load_planes(lrow, hrow, row_ok, q, HW, lim4)
        return h, la, lb

    @gluon.jit
    def _weights(h, la, lb, hbw, BF16: gl.constexpr):
        """A round's bf16 weights [.., S, 2, 2] of each half: decoded planes or, BF16, the bf16
        words as loaded (registers renamed)."""
        if BF16:
            alo, ahi = gl.split(la)
            blo, bhi = gl.split(lb)
            t0 = _halves(alo, ahi)
            t1 = _halves(blo, bhi)
        else:
            t0, t1 = _decode(h, la, lb, hbw)
        return t0, t1

    @gluon.jit
    def _decode(h, la, lb, hbw):
        """``DECODE_PTX`` on [.., S] plane words -> bf16 [.., S, 2, 2] of each half (an H word's
        pair columns 4q + 2 hi + lo: the last two dimensions hi, lo)."""
        alo, ahi, blo, bhi = gl.inline_asm_elementwise(
            _DECODE, "=r,=r,=r,=r,r,r,r,r", [la, lb, h, hbw],
            dtype=(gl.int32, gl.int32, gl.int32, gl.int32), is_pure=True, pack=1)
        return _halves(alo, ahi), _halves(blo, bhi)

    @gluon.jit
    def _halves(wlo, whi):
        """Two int32 tensors of bf16x2 words (pair columns 0-1 and 2-3 of an H word) -> bf16
        [.., 2 (hi), 2 (lo)] (registers renamed)."""
        j = gl.join(wlo, whi)
        lo = (j & 0xFFFF).to(gl.int16)
        hi = (j >> 16).to(gl.int16)
        return gl.join(lo, hi).to(gl.bfloat16, bitcast=True)

    @gluon.jit
    def _load_x(xrow, tok_ok, col, KH, K, lim):
        """One round's x [NT, 16 S] of each half at pair columns ``col`` (physical order); 0
        past the program's range, past K and for rows >= M."""
        ok = tok_ok & (col < lim)
        xa = gl.load(xrow + col, mask=ok & (col < K), other=0.0)
        xb = gl.load(xrow + KH + col, mask=ok & (KH + col < K), other=0.0)
        return xa, xb

    @gluon.jit
    def _logical(v, S: gl.constexpr):
        """[R, 16 S] in the physical column order (4 S c + 4 s + 2 hi + lo) -> the relabelled
        K order (16 s + 8 hi + 2 c + lo): registers renamed."""
        R: gl.constexpr = v.shape[0]
        t = gl.permute(gl.reshape(v, [R, 4, S, 2, 2]), [0, 2, 3, 1, 4])
        return gl.reshape(t, [R, 16 * S])

    @gluon.jit
    def _a_operand(t, S: gl.constexpr, DOT: gl.constexpr):
        """Decoded [4 G, 16, 4, S, 2, 2] (warp, row, c, s, hi, lo: physical column 4 S c + 4 s +
        2 hi + lo) -> wgmma's A operand [64 G, 16 S] in the relabelled K order (registers
        renamed only)."""
        NW: gl.constexpr = t.shape[0]
        a = gl.reshape(gl.permute(t, [0, 1, 3, 4, 2, 5]), [NW * 16, 16 * S])
        return gl.convert_layout(a, DOT, assert_trivial=True)

    @gluon.jit
    def _esc_wgmma(acc, xe_s, x_ptr, sxm, kent_ptr, kval_ptr, koff_ptr, n0, M, N, G,
                   NW: gl.constexpr, NT: gl.constexpr, EB: gl.constexpr, XE: gl.constexpr,
                   DOT: gl.constexpr):
        """acc plus the exact products of the escapes of rows [n0, n0 + 16 NW) over all K:
        16 entries per wgmma, A [16 NW, 16] = each entry's value at its row (0 elsewhere), B =
        x [NT, 16] at the entries' columns (through ``xe_s``)."""
        b0 = n0 // _IDX_ROWS
        lo = gl.load(koff_ptr + b0 * G)
        hi = gl.load(koff_ptr + gl.minimum(b0 + NW, gl.cdiv(N, _IDX_ROWS)) * G)
        er = _i2(16 * NW, 0, EB)
        ee = _i2(_ESC_CHUNK, 1, EB)
        xm = _i2(NT, 0, XE)
        xe = _i2(_ESC_CHUNK, 1, XE)
        for e0 in range(lo, hi, _ESC_CHUNK):
            ok = e0 + ee < hi
            ent = gl.load(kent_ptr + e0 + ee, mask=ok, other=0)
            v = gl.load(kval_ptr + e0 + ee, mask=ok, other=0)
            r = (((ent >> 24) & 0xFF) - n0 % 256) & 255              # row in the program
            a = gl.where(ok & (r == er), v, 0).to(gl.bfloat16, bitcast=True)
            okb = e0 + xe < hi
            col = gl.load(kent_ptr + e0 + xe, mask=okb, other=0) & 0xFFFFFF
            xv = gl.load(x_ptr + xm * sxm + col, mask=okb & (xm < M), other=0.0)
            xe_s.store(xv)
            fence_async_shared()
            _barrier()
            acc = warpgroup_mma(gl.convert_layout(a, DOT), xe_s.permute((1, 0)), acc)
            _barrier()   # every warpgroup's wgmma has read xe_s before the next chunk's store
        return acc

    @gluon.jit
    def _w12_wgmma_kernel(x_ptr, y_ptr, ws_ptr, lock_ptr, l_ptr, h_ptr, hb_ptr, koff_ptr,
                          kent_ptr, kval_ptr, M, N, K, HW, G, sxm, sym, RPS,
                          NT: gl.constexpr, S: gl.constexpr, NW: gl.constexpr,
                          HB_PER_ROW: gl.constexpr, ESC: gl.constexpr, USE_SPLIT: gl.constexpr,
                          P: gl.constexpr, XL: gl.constexpr, ACC: gl.constexpr,
                          DOT: gl.constexpr, SL: gl.constexpr, EB: gl.constexpr,
                          XE: gl.constexpr, SLE: gl.constexpr, BF16: gl.constexpr = 0,
                          PB: gl.constexpr = None, PDL: gl.constexpr = 0):
        # x_ptr: bf16 [M, K] (row stride sxm); l_ptr / h_ptr: int32 views of the planes (rows of
        # 2 HW / HW words, HW = Kp / 8); hb_ptr: uint8 [1], or an int32 view of the per-row
        # [N, 16] bytes (HB_PER_ROW); y_ptr bf16
        # [M, N] (row stride sym). NW = 4 x warpgroups: the program's rows are [n0, n0 + 16 NW).
        # Grid (row blocks, splits): program (pid, pid_k) runs rounds [pid_k RPS, (pid_k + 1)
        # RPS). USE_SPLIT: ws_ptr fp32 [splits, M, N], lock_ptr a zeroed ticket per row block.
        # PDL (as mma.py): the first round's planes (constant) are loaded before the wait; x,
        # the escapes' x and every write after it. BF16: l_ptr is an int32 view of a bf16 weight
        # [N, K] (rows of 4 HW words, HW = K / 8; its halves split at K / 2; no planes, bases or
        # escapes), loaded in layout PB as the W12 form's H words' columns.
        _gdc_launch_dependents(PDL == 1)
        pid = gl.program_id(0)
        pid_k = gl.program_id(1)
        n0 = pid * (16 * NW)
        RC: gl.constexpr = 16 * S
        w = _i4(NW, 0, P)
        r = _i4(16, 1, P)
        q0 = S * _i4(4, 2, P) + _i4(S, 3, P)                  # H word in the round: S c + s
        row = n0 + 16 * w + r
        row_ok = row < N
        lrow = l_ptr + row.to(gl.int64) * (2 * HW)
        hrow = h_ptr + row.to(gl.int64) * HW
        if BF16:
            hbw = gl.zeros([NW, 16, 4, S], gl.int32, P)                # not read
            rowb = n0 + 16 * _i4(NW, 0, PB) + _i4(16, 1, PB)
            row_okb = rowb < N
            wrow = l_ptr + rowb.to(gl.int64) * (4 * HW)
            qb0 = 2 * S * _i4(4, 2, PB) + _i4(2 * S, 3, PB)
        elif HB_PER_ROW:   # [N, 16] bytes: word 0 of a row is its table word hb * 0x01010101
            hbw = gl.load(hb_ptr + row * 4, mask=row_ok, other=0) + gl.zeros([NW, 16, 4, S],
                                                                              gl.int32, P)
        else:
            hbw = gl.load(hb_ptr).to(gl.int32) * 0x01010101 + gl.zeros([NW, 16, 4, S],
                                                                        gl.int32, P)
        if not BF16:   # the bf16 names unused
            wrow = lrow
            row_okb = row_ok
            qb0 = q0
        xm = _i2(NT, 0, XL)
        xj = _i2(RC, 1, XL)
        xrow = x_ptr + xm * sxm
        tok_ok = xm < M

        KH = 4 * HW
        rounds = gl.cdiv(KH, RC)
        r0 = pid_k * RPS
        n_iter = gl.minimum(r0 + RPS, rounds) - r0
        lim = gl.minimum((r0 + RPS) * RC, KH)
        base = r0 * RC
        h, la, lb = _load_round(lrow, hrow, row_ok, base // 4 + q0, wrow, row_okb,
                                base // 2 + qb0, HW, lim // 4, BF16)
        _gdc_wait(PDL > 0)
        _gdc_launch_dependents(PDL == 3)
        xa, xb = _load_x(xrow, tok_ok, base + xj, KH, K, lim)

        xs = gl.allocate_shared_memory(gl.bfloat16, [4, NT, RC], SL)   # [buffer x 2 + half]
        acc = gl.zeros([16 * NW, NT], gl.float32, ACC)
        xs.index(0).store(_logical(xa, S))
        xs.index(1).store(_logical(xb, S))
        fence_async_shared()
        _barrier()
        for i in range(n_iter):
            nb = base + (i + 1) * RC
            h2, la2, lb2 = _load_round(lrow, hrow, row_ok, nb // 4 + q0, wrow, row_okb,
                                       nb // 2 + qb0, HW, lim // 4, BF16)
            xa, xb = _load_x(xrow, tok_ok, nb + xj, KH, K, lim)
            t0, t1 = _weights(h, la, lb, hbw, BF16)
            a0 = _a_operand(t0, S, DOT)
            a1 = _a_operand(t1, S, DOT)
            cur = 2 * (i % 2)
            nxt = 2 - cur
            acc = warpgroup_mma(a0, xs.index(cur).permute((1, 0)), acc, is_async=True)
            acc = warpgroup_mma(a1, xs.index(cur + 1).permute((1, 0)), acc, is_async=True)
            # buffer nxt was last read by round i - 1, whose wgmmas every warpgroup waited on
            # before the last barrier
            xs.index(nxt).store(_logical(xa, S))
            xs.index(nxt + 1).store(_logical(xb, S))
            fence_async_shared()
            # this round's A registers stay live (deps) until its wgmmas are done
            acc, a0, a1 = warpgroup_mma_wait(0, deps=[acc, a0, a1])
            _barrier()
            h, la, lb = h2, la2, lb2
        # the escapes' exact products after the main loop (before it, the accumulator defined
        # in a branch made ptxas serialise the loop's wgmmas: C7515)
        if ESC:
            if pid_k == 0:
                xe_s = gl.allocate_shared_memory(gl.bfloat16, [NT, _ESC_CHUNK], SLE)
                acc = _esc_wgmma(acc, xe_s, x_ptr, sxm, kent_ptr, kval_ptr, koff_ptr, n0, M, N,
                                 G, NW, NT, EB, XE, DOT)
        _gdc_launch_dependents(PDL == 2)

        orow = n0 + _i2(16 * NW, 0, ACC)
        otok = _i2(NT, 1, ACC)
        ok = (orow < N) & (otok < M)
        if USE_SPLIT:
            mn = M * N
            gl.store(ws_ptr + pid_k.to(gl.int64) * mn + otok * N + orow, acc, mask=ok)
            _barrier()   # every thread's partial is written before the ticket is taken
            ticket = gl.atomic_add(lock_ptr + pid, 1, sem="acq_rel", scope="gpu")
            if ticket == gl.num_programs(1) - 1:   # the last of the row block's programs
                tot = gl.load(ws_ptr + otok * N + orow, mask=ok, other=0.0, cache_modifier=".cg")
                for sp in range(1, gl.num_programs(1)):
                    tot += gl.load(ws_ptr + sp.to(gl.int64) * mn + otok * N + orow, mask=ok,
                                   other=0.0, cache_modifier=".cg")
                gl.store(y_ptr + otok * sym + orow, tot.to(gl.bfloat16), mask=ok)
                gl.atomic_xchg(lock_ptr + pid, 0)
        else:
            gl.store(y_ptr + otok * sym + orow, acc.to(gl.bfloat16), mask=ok)


def layouts(cfg: WgConfig, NT: int) -> dict:
    """The kernel's layouts for cfg at B width NT: P (plane words [4 G, 16, 4, S]: S
    contiguous words per thread and row), XL (x [NT, 16 S], 4 S contiguous elements per thread),
    ACC (wgmma's accumulator [64 G, NT]), DOT (its A operand), SL (the x buffers), EB / XE / SLE
    (the escape wgmma's A tile, x gather and x buffer), PB (a bf16 weight's words [4 G, 16, 4,
    2 S]: the 2 S contiguous words of the thread's H words' columns)."""
    nw = 4 * cfg.groups
    S = cfg.words
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[nw, 1],
                                    instr_shape=[16, NT, 16])
    return dict(
        P=gl.BlockedLayout([1, 1, 1, S], [1, 8, 4, 1], [nw, 1, 1, 1], [3, 2, 1, 0]),
        PB=gl.BlockedLayout([1, 1, 1, 2 * S], [1, 8, 4, 1], [nw, 1, 1, 1], [3, 2, 1, 0]),
        XL=gl.BlockedLayout([1, 4 * S], [8, 4], [nw, 1], [1, 0]),
        ACC=acc, DOT=gl.DotOperandLayout(operand_index=0, parent=acc, k_width=2),
        SL=gl.NVMMASharedLayout(swizzle_byte_width=min(128, 32 * S), element_bitwidth=16, rank=2),
        EB=gl.BlockedLayout([1, 2], [8, 4], [nw, 1], [1, 0]),
        XE=gl.BlockedLayout([1, 2], [4, 8], [nw, 1], [1, 0]),
        SLE=gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=16, rank=2))


SPLITS = (2, 3, 4, 6, 8)   # split-K offered while the programs stay <= 2 per SM
MAX_WORDS_NT = 512         # words x NT above this spill (sm_90 compile: s8 at NT 128 spills
#                            580 bytes with triton 3.6's ptxas, which also crashes on g2s8)


def candidates(M: int, N: int, K: int, n_sm: int) -> tuple:
    """The tuning space at M rows (W12 and bf16 weights alike): groups 1 / 2 x words 4 / 8,
    within SMEM_LIMIT and MAX_WORDS_NT; for the words-4 bases also the splits of SPLITS that
    keep the programs <= 2 n_sm, give a plan of their own and >= 2 rounds per program."""
    out = []
    for base in (WgConfig(g, s) for g in (1, 2) for s in (4, 8)):
        if smem_bytes(base, M) > SMEM_LIMIT or base.words * nt_for(M) > MAX_WORDS_NT:
            continue
        out.append(base)
        if base.words != 4:
            continue
        blocks = _cdiv(N, 64 * base.groups)
        seen = {split_plan(base, K)}
        for split in SPLITS:
            cfg = replace(base, split=split)
            plan = split_plan(cfg, K)
            if blocks * plan[1] > 2 * n_sm:
                break
            if plan not in seen and plan[0] >= 2:
                seen.add(plan)
                out.append(cfg)
    return tuple(out)


def default_config(M: int, N: int, K: int, n_sm: int) -> WgConfig:
    """Before tuning: one warpgroup, 16-byte loads, and the smallest split of SPLITS that gives
    every SM a program (>= 2 rounds each), if the row blocks are fewer than the SMs."""
    base = WgConfig(1, 4)
    blocks = _cdiv(N, 64)
    for split in (1,) + SPLITS:
        cfg = replace(base, split=split)
        if split_plan(cfg, K)[0] < 2:
            break
        base = cfg
        if blocks * split >= n_sm:
            break
    return base


def _tune_key(x: torch.Tensor, w) -> str:
    """Key in kernel's tune cache and file: "wg-" + the weight's kind (w12 / bf16), GPU model,
    M, N, K."""
    return _k.kind_tune_key(KEY_PREFIX, x, w)


def autotune(x: torch.Tensor, w, cands=None) -> WgConfig:
    """Time the candidates on (x, w) as the other W12 tuners do (CUDA-graph replays over a
    >= 512 MB ring of weight copies) and cache the fastest for (kind, GPU, M, N, K). ``w``:
    W12Planes (``w12_wgmma``) or a bf16 [N, K] weight (``bf16_wgmma``)."""
    kind, N, K = _k.weight_kind(w)
    M = x.shape[0]
    run = w12_wgmma if kind == "w12" else bf16_wgmma
    ring = _k.weight_ring(w)
    cands = cands or candidates(M, N, K, _k._num_sms(x.device))
    best = _k.fastest(cands, lambda c: lambda i: run(x, ring[i], c), len(ring),
                      f"wgmma {kind} M={M} N={N} K={K}")
    _k._remember(_tune_key(x, w), best)
    return best


def tuned_config(x: torch.Tensor, w) -> WgConfig:
    """Cached (memory or $SPECPILOT_W12_TUNE_FILE), else tuned now when allowed, else
    ``default_config``. ``w`` as ``autotune``'s."""
    _, N, K = _k.weight_kind(w)
    return _k.cached_or_tuned(
        _tune_key(x, w), lambda: autotune(x, w),
        lambda: default_config(x.shape[0], N, K, _k._num_sms(x.device)))


def _check(name: str, x: torch.Tensor, K: int) -> None:
    M = x.shape[0] if x.dim() == 2 else 0
    if (x.dim() != 2 or not (1 <= M <= MAX_M and K % 8 == 0) or x.shape[1] != K
            or x.dtype != torch.bfloat16):
        raise ValueError(f"{name}: needs bf16 x [M, K] with 1 <= M <= {MAX_M}, K % 8 == 0 and "
                         f"K == the weight's ({K}); got x {x.dtype} {tuple(x.shape)}")
    if not HAS_GLUON:
        raise RuntimeError(f"{name} needs Triton with Gluon's Hopper module (triton >= 3.5)")
    if not supported(M, K, x.device):
        raise RuntimeError(f"{name} runs on compute capability 9.x GPUs (wgmma); x is on "
                           f"{x.device}")


def _launch(x: torch.Tensor, N: int, cfg: WgConfig, weight_args: tuple, HW: int, G: int,
            bf16: bool, trigger: str, **consts) -> torch.Tensor:
    """Run _w12_wgmma_kernel on x [M, K] for N outputs: y, the split-K plan and workspace, the
    layouts and the PDL launch (pdl.GEMV_TRIGGER[trigger]); ``weight_args``: the six weight
    pointers (planes, bases, escape index), ``consts``: the weight's constexprs."""
    M, K = x.shape
    if smem_bytes(cfg, M) > SMEM_LIMIT:
        raise ValueError(f"wgmma: {cfg} at M = {M} needs {smem_bytes(cfg, M)} bytes of "
                         f"shared memory (limit {SMEM_LIMIT})")
    NT = nt_for(M)
    y = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)
    rps, split = split_plan(cfg, K, bf16)
    blocks = _cdiv(N, 64 * cfg.groups)
    ws, locks = _k.split_buffers(y, split, blocks)
    _w12_wgmma_kernel[(blocks, split)](
        x, y, ws, locks, *weight_args, M, N, K, HW, G, x.stride(0), y.stride(0), rps,
        NT=NT, S=cfg.words, NW=4 * cfg.groups, USE_SPLIT=split > 1, BF16=bf16,
        **layouts(cfg, NT), **_pdl.launch_args(x, _pdl.GEMV_TRIGGER[trigger]),
        num_warps=4 * cfg.groups, **consts)
    return y


def w12_wgmma(x: torch.Tensor, planes: W12Planes, cfg: WgConfig | None = None) -> torch.Tensor:
    """``x @ W^T`` (bf16 [M, N], fp32 accumulation) for bf16 x [M, K], 1 <= M <= MAX_M, on an
    sm_90 GPU. ``cfg``: default ``tuned_config``."""
    _check("w12_wgmma", x, planes.K)
    if planes.idx_rows != IDX_ROWS:
        raise ValueError(f"w12_wgmma reads the {IDX_ROWS}-row escape index")
    x = x.contiguous()
    cfg = cfg or tuned_config(x, planes)
    hb = planes.hb.view(torch.int32) if planes.per_row else planes.hb
    weight_args = (planes.L.view(torch.int32), planes.H.view(torch.int32), hb, planes.koff,
                   planes.kent, planes.kval)
    return _launch(x, planes.N, cfg, weight_args, planes.Kp // 8, _cdiv(planes.Kp // 2, GROUP),
                   False, "w12", HB_PER_ROW=planes.per_row, ESC=planes.kent.numel() > 0)


def bf16_wgmma(x: torch.Tensor, w: torch.Tensor, cfg: WgConfig | None = None) -> torch.Tensor:
    """``x @ w^T`` for bf16 x [M, K] and a bf16 weight [N, K], 1 <= M <= MAX_M, on an sm_90
    GPU: the W12 kernel's loop on the bf16 words (no decode, no escapes), the bf16 side of its
    measurements. On a weight without escapes and K a multiple of 32 it equals ``w12_wgmma``
    bit for bit (the same A registers in the same order). ``cfg``: default ``tuned_config``."""
    if w.dtype != torch.bfloat16 or w.dim() != 2:
        raise ValueError(f"bf16_wgmma: needs a bf16 weight [N, K]; got {w.dtype} "
                         f"{tuple(w.shape)}")
    _check("bf16_wgmma", x, w.shape[1])
    x, w = x.contiguous(), w.contiguous()
    cfg = cfg or tuned_config(x, w)
    wi = w.view(torch.int32)
    return _launch(x, w.shape[0], cfg, (wi,) * 6, w.shape[1] // 8, 1, True, "bf16",
                   HB_PER_ROW=False, ESC=False)
