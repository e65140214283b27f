"""Triton kernels for W12 weights: fused decode + GEMM, a bf16 GEMM from the same template, and a
standalone decode kernel. Format: docs/w12.md; design notes: docs/w12.md, "GPU kernels".

Public API
----------
* ``prepare(w12, device) -> W12Planes``: the format planes on a device plus the kernel's escape
  index (escapes re-sorted by 16-row block and 32-pair column group, built once at load time).
* ``w12_matmul(x, planes, *, reproducible=False, config=None)``: ``x @ W^T`` for x ``[M, K]`` bf16,
  fp32 accumulation, bf16 output.
* ``bf16_matmul(x, w, *, config=None)``: the same template with the weight tile loaded as bf16.
  With the same config, ``w12_matmul(..., reproducible=True)`` equals it bit for bit.
* ``decode_w12_gpu(planes) -> bf16 [N, K]``: the kernel's decode routine as a standalone kernel.
* Configs: ``GemmConfig``, ``get_config`` (tuned per (M bucket, N, K) on the GPU, cached in memory
  and optionally in a JSON file named by ``$SPECPILOT_W12_TUNE_FILE``), ``autotune``. The same
  cache and file hold the configs of gemv.py's tuner, under keys that start with "gemv-".

Kernel design (one program = BLOCK_N weight rows x one split-K range x BLOCK_M activation rows)
------------------------------------------------------------------------------------------------
* Split-halves K order. Step ``j`` loads ``L[n, j:j+BK]``, ``L[n, Kp/2+j : ...]`` and ``H[n, j:j+BK]``
  (three contiguous uint8 tiles, 16-byte vector loads) and the two matching x tiles, and does
  ``acc += W[:, j:j+BK] x0 + W[:, Kp/2+j:...] x1`` as two ``tl.dot``. The bf16 kernel walks K in the
  same order, so both kernels sum the same products in the same order.
* Swapped operands: ``acc[BN, BM] = W_tile @ x_tile^T``. The decoded weight is the MMA A operand
  (Hopper wgmma takes it from registers), the few activation rows are the N side (>= 16).
* Decode (``_decode_tiles``) builds 32-bit words that hold two K-consecutive weights of one
  half (the register pairing of the MMA operands). On the GPU it is inline PTX (``DECODE_PTX``,
  4 pair columns = 8 weights per instance): the W12-v2 H word is laid out so that, with its sign
  bits masked off, its code nibbles are ``prmt`` selectors into an 8-byte table
  ``(hb, .., hb+6, 0)``: one ``prmt`` looks up 4 exponent bytes, one ``lop3`` ors the signs in
  (already at bit 7 for the first half, one shift for the second), one ``prmt`` per output word
  interleaves them with the L bytes. 16 instructions per 8 weights (2 per pair) before ptxas
  fuses and/or into ``lop3``; the W12-v1 decode of the first H200 measurement
  (``docs/benchmarks/w12.md``) took ~9.5 per pair and was bound by them. The interpreter runs the
  format's rule in plain Triton ops (same bits).
* Escapes. The format's escape code decodes to signed zero in the main loop. The exact value is
  applied in one of two ways:
  - fast mode (default): an epilogue per program, before the split-K reduction. Its escapes
    (usually 0..a few) are gathered in chunks of 16 as ``V[BN, 16]`` (value at the escape's row,
    zeros elsewhere) and ``X[16, BM]`` (the activations at the escapes' columns) and added with one
    ``tl.dot`` into the fp32 accumulator: ``out[m, n] += x[m, k] * w_true``. A bf16 x bf16 product
    is exact in fp32, so this differs from summing in K order only by fp32 rounding order.
  - reproducible mode: the exact bits are written into the decoded tile before the dot
    (``_patch_escapes``), so the W12 GEMM is the bf16 GEMM on the decoded weights, bit for bit.
  The escape index (``koff``/``kent``/``kval``) makes a program's escapes one contiguous range per
  16-row block (``IDX_ROWS``) for a K-step or a split-K range, and one range in all for a
  program without split-K; a program walks only its own rows' escapes, its ranges read as one
  list (``_esc_table``).
* Split-K is deterministic: each program stores its fp32 partial in a workspace, then takes a
  ticket (atomic add on a per-tile counter); the last one sums the partials in split order, casts
  to bf16, stores, and resets the counter to 0. No fp32 atomics, no memset, no second launch.
  The counters are one buffer per device: split-K GEMMs must not run concurrently on two streams.
* Large M (> ``DECODE_THEN_MATMUL_M``, fast mode only): decode to a bf16 scratch and call
  ``torch.matmul`` (prefill is compute-bound; decoding per activation tile would repeat the decode).
* Small M (fast mode only): ``MMA_MIN_M`` (2) to ``MMA_MAX_M`` (16) rows the Gluon tensor-core
  kernel of ``mma.py``; M = 1 (and M = 2 without Gluon or with K % 8 != 0) the CUDA-core GEMV of
  ``gemv.py``, which on the H200 beats this GEMM and cuBLAS at M = 1 (docs/benchmarks/w12.md).

The kernels also run under ``TRITON_INTERPRET=1`` on CPU tensors (the tests do that). The
interpreter mishandles bf16 ``tl.dot`` operands (it multiplies their raw uint16 storage), so in
interpreter mode the dots upcast both operands to fp32 first (``DOT_F32``): products of bf16 values
are exact in fp32, so only the summation order differs from the GPU. The interpreter also rounds
fp32 -> bf16 toward zero (the GPU rounds to nearest even), and it cannot run inline PTX.
"""
from __future__ import annotations

import functools
import json
import math
import os
import warnings
from dataclasses import asdict, dataclass, replace

import torch

from .format import TILE_K, TILE_N, W12Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the reference path (decode + torch) still works
    triton = None
    tl = None

HAS_TRITON = triton is not None
IDX_ROWS = 16              # escape-index row block (rows): a program walks its own rows' escapes
IDX_SPAN = 256             # kent keeps row % IDX_SPAN: programs of <= 256 rows, aligned
TC_IDX_ROWS = 64           # row block of the index the tensor-core GEMM reads (W12Planes.tc)
GROUP = 32                 # escape-index column group, in pair columns; BLOCK_K is a multiple
ESC_CHUNK = 16             # escapes per epilogue dot (tl.dot needs K >= 16)
ESC_PRE_VALUES = (0, 16, 32, 64, 128)   # GemmConfig.esc_pre (and gemv.GemvConfig.esc_pre)
ESC_PRE_CAND = 64          # the esc_pre that the tuning spaces pair with W12 tilings
MAX_COL = 1 << 24          # kent packs the column in 24 bits
DECODE_THEN_MATMUL_M = 256  # fast mode above this M: decode kernel + torch.matmul
GEMV_MAX_M = 2  # fast mode up to this M: the CUDA-core GEMV (gemv.py; faster than this GEMM) ...
MMA_MIN_M = 2   # ... except from this M to MMA_MAX_M where the Gluon tensor-core kernel runs
MMA_MAX_M = 16  # (mma.py; at M = 2 2.5-8% faster per token than the tuned GEMV, session 32;
#                  at M = 9 / 16 12% / 7% (Qwen3.8-27B) and 16% / 4% (Muse-Glimmer-30B) faster
#                  than this GEMM tuned, session 37)
WGMMA_MIN_M = MMA_MAX_M + 1   # with $SPECPILOT_W12_WGMMA=1, from here to wgmma.MAX_M rows the
#                               warpgroup-MMA kernel (wgmma.py, sm_90; not yet run on a GPU)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------------------------
# Device-ready weight
# ---------------------------------------------------------------------------------------------

@dataclass
class W12Planes:
    """A W12 weight ready for the kernels: the format planes on one device plus the escape index.

    ``koff`` (int32 ``[ceil(N / idx_rows) * G + 1]``, ``G = ceil(Kp/2 / 32)``) are CSR offsets
    over (``idx_rows``-row block, 32-pair column group) in row-block-major order; a group holds the
    escapes in columns ``[32g, 32g+32)`` and ``[Kp/2 + 32g, ...)``. So the escapes of rows
    ``[n0, n0 + BN)`` over the whole K (``n0`` a multiple of ``idx_rows``) are one contiguous
    range. ``kent`` (int32) = ``(row % 256) << 24 | col`` (the top byte read unsigned),
    ``kval`` (int16) = the exact bf16 bits.

    ``tc``: the same planes with a second escape index, over ``TC_IDX_ROWS``-row blocks, which
    the tensor-core GEMM reads instead of this one. Its programs are 64 rows: on the 16-row
    index a split-K program walks four ranges, and in one H200 run with the same configs the
    GEMM took 4.6-6.1% longer per split-K layer (2.5% per token at M = 4) than on the 64-row
    index (docs/benchmarks/w12.md, session 28). The GEMV (8-16-row programs) reads this one.
    None: every kernel reads this index.
    """
    N: int
    K: int
    L: torch.Tensor      # uint8 [N, Kp]
    H: torch.Tensor      # uint8 [N, Kp/2]
    hb: torch.Tensor     # uint8 [1] (per tensor) or [N, 16] (per row, each hb repeated 16 times)
    koff: torch.Tensor   # int32
    kent: torch.Tensor   # int32 [n_esc]
    kval: torch.Tensor   # int16 [n_esc]
    idx_rows: int = IDX_ROWS   # the escape index's row block (escape_index)
    tc: "W12Planes | None" = None   # the planes again, indexed for the tensor-core GEMM

    def __post_init__(self):
        if self.tc is not None and (self.tc.tc is not None or self.tc.L is not self.L
                                    or self.tc.H is not self.H or self.tc.hb is not self.hb):
            raise ValueError("W12Planes.tc must hold the same planes (L, H, hb) and no tc of "
                             "its own")
        # a kernel reads koff at row-block offsets computed from idx_rows: a mismatch would read
        # past its end on the GPU
        n_blocks = _cdiv(self.N, self.idx_rows) * _cdiv(self.L.shape[1] // 2, GROUP)
        if self.koff.numel() != n_blocks + 1:
            raise ValueError(f"W12Planes: koff has {self.koff.numel()} offsets, its escape index "
                             f"of {self.idx_rows}-row blocks needs {n_blocks + 1}")

    @property
    def Kp(self) -> int:
        return self.L.shape[1]

    @property
    def device(self) -> torch.device:
        return self.L.device

    @property
    def per_row(self) -> bool:
        return self.hb.dim() == 2


def kernel_hb(hb: torch.Tensor) -> torch.Tensor:
    """The kernels' form of a W12 ``hb``: uint8 [1] as is; per-row [N] -> [N, 16] (each row's hb
    16 times, so it loads like a 16-byte plane column and the decode stays in the planes' register
    layout; a broadcast [N, 1] operand made Triton decode in the MMA operand layout, ~50% more
    instructions)."""
    return hb if hb.numel() == 1 else hb.reshape(-1, 1).expand(-1, 16).contiguous()


def escape_coords(w: W12Tensor):
    """(rows, cols, bits) int64 tensors of the escape side list, in list order."""
    Kp = w.L.shape[1]
    n_tk = _cdiv(Kp, TILE_K)
    off = w.esc_off.to(torch.int64)
    counts = off[1:] - off[:-1]
    tile = torch.repeat_interleave(torch.arange(counts.numel(), device=off.device), counts)
    ent = w.esc.to(torch.int64)
    local = ent >> 16
    rows = (tile // n_tk) * TILE_N + local // TILE_K
    cols = (tile % n_tk) * TILE_K + local % TILE_K
    return rows, cols, ent & 0xFFFF


def _signed32(v: torch.Tensor) -> torch.Tensor:
    """int64 values < 2**32 -> the int32 with the same 32 bits."""
    return (v - ((v >> 31) << 32)).to(torch.int32)


def escape_index(w: W12Tensor, idx_rows: int = IDX_ROWS):
    """Build the kernel escape index ``(koff, kent, kval)`` of ``W12Planes`` (CPU tensors), over
    ``idx_rows``-row blocks (a power of two <= 256; ``W12Planes`` says the layout)."""
    return _build_index(*escape_coords(w), *w.L.shape, idx_rows)


def _build_index(rows, cols, bits, N: int, Kp: int, idx_rows: int):
    if Kp >= MAX_COL:
        raise ValueError(f"W12 kernels support K < {MAX_COL}, got padded K {Kp}")
    if idx_rows < 1 or idx_rows > IDX_SPAN or idx_rows & (idx_rows - 1):
        raise ValueError(f"idx_rows must be a power of two <= {IDX_SPAN}, got {idx_rows}")
    half = Kp // 2
    G = _cdiv(half, GROUP)
    n_rb = _cdiv(N, idx_rows)
    rows, cols, bits = (t.cpu().to(torch.int64) for t in (rows, cols, bits))
    j = torch.where(cols < half, cols, cols - half)
    key = (rows // idx_rows) * G + j // GROUP
    order = torch.argsort(key, stable=True)
    rows, cols, bits, key = rows[order], cols[order], bits[order], key[order]
    koff = torch.zeros(n_rb * G + 1, dtype=torch.int64)
    koff[1:] = torch.bincount(key, minlength=n_rb * G).cumsum(0)
    kent = _signed32(((rows % IDX_SPAN) << 24) | cols)
    kval = bits - ((bits >> 15) << 16)                    # to the signed 16-bit range
    return koff.to(torch.int32), kent, kval.to(torch.int16)


def reindex(p: W12Planes, idx_rows: int) -> W12Planes:
    """``p`` with its escape index rebuilt over ``idx_rows``-row blocks (planes shared; the new
    index on p's device). For A/B timing of the index layout and for tests."""
    koff, kent = p.koff.cpu().to(torch.int64), p.kent.cpu().to(torch.int64)
    G = _cdiv(p.Kp // 2, GROUP)
    key = torch.repeat_interleave(torch.arange(koff.numel() - 1), koff[1:] - koff[:-1])
    base = (key // G) * p.idx_rows
    rows = base + ((kent >> 24) & 0xFF) - base % IDX_SPAN
    koff, kent, kval = _build_index(rows, kent & 0xFFFFFF, p.kval.cpu().to(torch.int64) & 0xFFFF,
                                    p.N, p.Kp, idx_rows)
    return replace(p, koff=koff.to(p.device), kent=kent.to(p.device), kval=kval.to(p.device),
                   idx_rows=idx_rows, tc=None)


def prepare(w: W12Tensor, device=None, idx_rows: int = IDX_ROWS,
            tc_rows: int | None = TC_IDX_ROWS) -> W12Planes:
    """Move a W12 tensor's planes to ``device`` (default: where they are) and index its escapes
    (``escape_index`` over ``idx_rows``-row blocks; with ``tc_rows`` other than ``idx_rows`` and
    not None, a second index over ``tc_rows``-row blocks as ``.tc``, for the tensor-core GEMM)."""
    device = torch.device(device) if device is not None else w.L.device
    N = w.L.shape[0]
    L, H, hb = w.L.contiguous().to(device), w.H.contiguous().to(device), kernel_hb(w.hb).to(device)
    tc = None
    if tc_rows is not None and tc_rows != idx_rows:
        tc = W12Planes(N, w.numel // N, L, H, hb, *(t.to(device) for t in escape_index(w, tc_rows)),
                       idx_rows=tc_rows)
    koff, kent, kval = escape_index(w, idx_rows)
    return W12Planes(N=N, K=w.numel // N, L=L, H=H, hb=hb, koff=koff.to(device),
                     kent=kent.to(device), kval=kval.to(device), idx_rows=idx_rows, tc=tc)


# ---------------------------------------------------------------------------------------------
# Triton kernels
# ---------------------------------------------------------------------------------------------


# Inline PTX of the decode (tl.inline_asm_elementwise, pack=4: 4 pair columns = 8 weights per
# instance). Inputs: $4 / $5 = the L bytes of the 4 first-half (a) / second-half (b) weights,
# $6 = their H word (format.py: codes d at nibbles 0-3 (a) and 4-7 (b), sign(a_i) at bit 8i+7,
# sign(b_i) at bit 8i+3), $7 = their rows' hb in every byte. Outputs: $0 / $1 = a's weights
# (0, 1) / (2, 3) as bf16x2, $2 / $3 = b's. The table T = (hb, hb+1, .., hb+6, 0) sits in two
# registers; with the sign bits masked off each code nibble is a prmt byte selector into it, and
# a's sign bits are then already at bit 7 of their looked-up bytes (b's 4 bits lower). prmt
# 0x5140 / 0x7362 interleave L bytes 0,1 / 2,3 with hi bytes 0,1 / 2,3 into two bf16 lanes.
# 16 instructions per 8 weights before ptxas fuses and/or pairs into lop3.
DECODE_PTX = ("{\n.reg .b32 t0, t1, m, e, s;\n"
              "add.u32 t0, $7, 0x03020100; add.u32 t1, $7, 0x00060504;\n"
              "and.b32 t1, t1, 0x00FFFFFF; and.b32 m, $6, 0x77777777;\n"
              "prmt.b32 e, t0, t1, m; and.b32 s, $6, 0x80808080; or.b32 e, e, s;\n"
              "prmt.b32 $0, $4, e, 0x5140; prmt.b32 $1, $4, e, 0x7362;\n"
              "shr.b32 m, m, 16; prmt.b32 e, t0, t1, m; shl.b32 s, $6, 4;\n"
              "and.b32 s, s, 0x80808080; or.b32 e, e, s;\n"
              "prmt.b32 $2, $5, e, 0x5140; prmt.b32 $3, $5, e, 0x7362;\n}")


if HAS_TRITON:
    _IDX_SPAN = tl.constexpr(IDX_SPAN)
    _GROUP = tl.constexpr(GROUP)
    _DECODE_PTX = tl.constexpr(DECODE_PTX)

    @triton.jit
    def _decode_tiles(l0, l1, h, hbt, PTX: tl.constexpr):
        """Decode of one K-step -> (t0, t1): uint16 [R, C] bf16 bit tiles of the first-half
        columns (bytes from ``l0``) and of the second-half ones (``l1``); escapes -> signed zero.

        ``l0``/``l1``/``h``: uint8 [R, C] tiles of L[:, j:j+C], L[:, Kp/2+j:...], H[:, j:j+C];
        ``hbt``: uint8 [R, C], every element's hb. ``PTX``: the inline-PTX routine (``DECODE_PTX``);
        else the format's rule in Triton ops (used by the interpreter; bitwise identical).
        """
        if PTX:
            t0, t1 = tl.inline_asm_elementwise(_DECODE_PTX, "=r,=r,=r,=r,r,r,r,r", [l0, l1, h, hbt],
                                               dtype=(tl.uint16, tl.uint16), is_pure=True, pack=4)
        else:
            R: tl.constexpr = l0.shape[0]
            C: tl.constexpr = l0.shape[1]
            i = tl.arange(0, 4)[None, None, :]
            word = tl.sum(tl.reshape(h, (R, C // 4, 4)).to(tl.uint32) << (8 * i).to(tl.uint32),
                          axis=2)[:, :, None]                           # [R, C/4, 1]
            hb = hbt.to(tl.uint32)
            t0 = _assemble(l0, tl.reshape((word >> (4 * i)) & 7, (R, C)),
                           tl.reshape((word >> (8 * i + 7)) & 1, (R, C)), hb)
            t1 = _assemble(l1, tl.reshape((word >> (16 + 4 * i)) & 7, (R, C)),
                           tl.reshape((word >> (8 * i + 3)) & 1, (R, C)), hb)
        return t0, t1

    @triton.jit
    def _hb_tile(hb_ptr, rn, n_ok, BK: tl.constexpr, HB_PER_ROW: tl.constexpr):
        """uint8 [len(rn), BK]: each element's hb (``kernel_hb`` layout), built once per program."""
        if HB_PER_ROW:
            hbt = tl.load(hb_ptr + rn[:, None] * 16 + (tl.arange(0, BK) % 16)[None, :],
                          mask=n_ok[:, None], other=0)
        else:
            hbt = tl.zeros((rn.shape[0], BK), tl.uint8) + tl.load(hb_ptr)
        return hbt

    @triton.jit
    def _assemble(lo, d, s, hb):
        """bf16 bits from the L byte, code ``d``, sign ``s`` and base: hi7 = hb + d, or 0 for
        code 7 (format.py)."""
        hi7 = tl.where(d == 7, 0, hb + d)
        return ((s << 15) | (hi7 << 8) | lo.to(tl.uint32)).to(tl.uint16)

    @triton.jit
    def _patch_escapes(t0, t1, koff_ptr, kent_ptr, kval_ptr, n0, j, N, HALF, G,
                       BN: tl.constexpr, BK: tl.constexpr, IR: tl.constexpr, NRB: tl.constexpr):
        """Write the exact bits of the escapes in rows [n0, n0+BN) x pair columns [j, j+BK) into
        the uint16 tiles t0 (columns j + c) and t1 (columns HALF + j + c)."""
        rows = tl.arange(0, BN)[:, None]
        cols = tl.arange(0, BK)[None, :]
        g1 = tl.minimum((j + BK) // _GROUP, G)
        for rb in tl.static_range(NRB):
            blk = n0 // IR + rb
            if blk * IR < N:
                lo = tl.load(koff_ptr + blk * G + j // _GROUP)
                hi = tl.load(koff_ptr + blk * G + g1)
                for e in range(lo, hi):
                    ent = tl.load(kent_ptr + e)
                    v = tl.load(kval_ptr + e).to(tl.uint16, bitcast=True)
                    at = rows == ((ent >> 24) & 0xFF) - n0 % _IDX_SPAN
                    col = ent & 0xFFFFFF
                    t0 = tl.where(at & (cols == col - j) & (col < HALF), v, t0)
                    t1 = tl.where(at & (cols == col - HALF - j), v, t1)
        return t0, t1

    @triton.jit
    def _mma(a, b, acc, DOT_F32: tl.constexpr):
        """acc + a @ b (bf16 operands; fp32 operands in the interpreter, see the module doc)."""
        if DOT_F32:
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        return acc

    @triton.jit
    def _x_tiles(x_tile, j, rk, m_ok, K, HALF, EVEN_K: tl.constexpr):
        """The two activation tiles of K-step ``j``: x[:, j:j+BK]^T and x[:, HALF+j:...]^T."""
        if EVEN_K:
            x_m0 = m_ok[None, :]
            x_m1 = m_ok[None, :]
        else:
            k0 = j + rk
            x_m0 = m_ok[None, :] & ((k0 < HALF) & (k0 < K))[:, None]
            x_m1 = m_ok[None, :] & ((k0 < HALF) & (k0 + HALF < K))[:, None]
        x0 = tl.load(x_tile + j, mask=x_m0, other=0.0, eviction_policy="evict_last")
        x1 = tl.load(x_tile + HALF + j, mask=x_m1, other=0.0, eviction_policy="evict_last")
        return x0, x1

    @triton.jit
    def _w12_tile(w_tile, h_tile, hbt, j, n_ok, rk, koff_ptr, kent_ptr, kval_ptr, n0, N, HALF, G,
                  EVEN_K: tl.constexpr, ESC_MODE: tl.constexpr, PTX: tl.constexpr,
                  BN: tl.constexpr, BK: tl.constexpr, IR: tl.constexpr, NRB: tl.constexpr):
        """Load and decode the two weight tiles of K-step ``j`` -> bf16 [BN, BK] x 2. Masked-out
        pairs load as 0 bytes and decode to finite values that meet x == +0, so both kernels get
        +0 products wherever x is masked. ESC_MODE 2 patches the escapes' exact bits in."""
        if EVEN_K:
            w_mp = n_ok[:, None]
        else:  # W12 planes: every pair column < HALF is stored (K padding holds +0)
            w_mp = n_ok[:, None] & ((j + rk) < HALF)[None, :]
        l0 = tl.load(w_tile + j, mask=w_mp, other=0, eviction_policy="evict_first")
        l1 = tl.load(w_tile + HALF + j, mask=w_mp, other=0, eviction_policy="evict_first")
        hh = tl.load(h_tile + j, mask=w_mp, other=0, eviction_policy="evict_first")
        t0, t1 = _decode_tiles(l0, l1, hh, hbt, PTX)
        if ESC_MODE == 2:
            t0, t1 = _patch_escapes(t0, t1, koff_ptr, kent_ptr, kval_ptr, n0, j, N, HALF, G,
                                    BN, BK, IR, NRB)
        return t0.to(tl.bfloat16, bitcast=True), t1.to(tl.bfloat16, bitcast=True)

    @triton.jit
    def _esc_fields(ent, val, em, n0, BN: tl.constexpr):
        """Raw entries (``_esc_load``) -> (their bf16 bits as uint16, row r relative to n0, ok: a
        real entry whose row lies in [n0, n0 + BN), column). kent holds row % 256 and a program's
        BN <= 256 rows are aligned to BN, so r needs no row block."""
        r = ((ent >> 24) & 0xFF) - n0 % _IDX_SPAN
        return (val.to(tl.uint16, bitcast=True), r, em & (r >= 0) & (r < BN),
                (ent & 0xFFFFFF).to(tl.int64))

    @triton.jit
    def _esc_table(koff_ptr, n0, N, G, g0, g1, IR: tl.constexpr, NRB: tl.constexpr,
                   WHOLE_K: tl.constexpr):
        """The program's escapes as one list of ``total`` entries over index ranges: (shift, cend,
        total), entry v of the list at index position v + shift[r] for the range r with
        cend[r - 1] <= v < cend[r]. WHOLE_K (no split-K): one range, every escape of its rows
        [n0, n0 + BN) over its NRB row blocks of IR rows; else one range per row block (column
        groups g0..g1). Its offsets are loaded at once (one round trip), and the list's chunks
        cross range boundaries, so a program pays no round trip per row block."""
        blk = n0 // IR
        if WHOLE_K:
            rb = tl.arange(0, 1)
            lo = tl.load(koff_ptr + (blk + rb) * G)
            hi = tl.load(koff_ptr + tl.minimum(blk + NRB, tl.cdiv(N, IR)) * G + rb)
        else:
            rb = tl.arange(0, NRB)
            ok = (blk + rb) * IR < N
            lo = tl.load(koff_ptr + (blk + rb) * G + g0, mask=ok, other=0)
            hi = tl.load(koff_ptr + (blk + rb) * G + g1, mask=ok, other=0)
        n = hi - lo
        cend = tl.sum(tl.where(rb[None, :] <= rb[:, None], n[None, :], 0), axis=1)  # inclusive
        return lo - (cend - n), cend, tl.sum(n, axis=0)

    @triton.jit
    def _esc_load(kent_ptr, kval_ptr, shift, cend, total, v0, k, ent0, val0,
                  ESC_CH: tl.constexpr):
        """Entries v0 .. v0 + ESC_CH - 1 of a program's list (``_esc_table``): (kent, kval, em),
        em = the entry exists. Loaded only if k == 0 (else ent0 / val0 are returned, as for
        masked-off entries: the GEMV's esc_late passes its K-step offset)."""
        v = v0 + tl.arange(0, ESC_CH)
        em = v < total
        live = em & (tl.zeros_like(v) + k == 0)
        nr: tl.constexpr = shift.shape[0]
        r = tl.sum((v[:, None] >= cend[None, :]).to(tl.int32), axis=1)      # its range
        at = v + tl.sum(tl.where(r[:, None] == tl.arange(0, nr)[None, :], shift[None, :], 0),
                        axis=1)
        return (tl.load(kent_ptr + at, mask=live, other=ent0),
                tl.load(kval_ptr + at, mask=live, other=val0), em)

    @triton.jit
    def _esc_prologue(koff_ptr, kent_ptr, kval_ptr, n0, N, G, s0, s1, BK: tl.constexpr,
                      IR: tl.constexpr, NRB: tl.constexpr, WHOLE_K: tl.constexpr,
                      ESC_PRE: tl.constexpr, LOAD: tl.constexpr):
        """Before a fast-mode main loop over K-steps s0..s1: (g0, g1) the program's K range in
        escape index groups and, with ESC_PRE, its escape list (``_esc_table``: shift, cend,
        total) and (ent_p, val_p) its first ESC_PRE entries, loaded now (LOAD) or zeros for the
        caller to load later (the GEMV's esc_late); without ESC_PRE those five are unused
        zeros."""
        g0 = tl.minimum(s0 * BK // _GROUP, G)
        g1 = tl.minimum(s1 * BK // _GROUP, G)
        if ESC_PRE > 0:
            shift, cend, total = _esc_table(koff_ptr, n0, N, G, g0, g1, IR, NRB, WHOLE_K)
            if LOAD:
                ent_p, val_p, _ = _esc_load(kent_ptr, kval_ptr, shift, cend, total, 0, 0, 0,
                                            0, ESC_PRE)
            else:
                ent_p = tl.zeros((ESC_PRE,), dtype=tl.int32)
                val_p = tl.zeros((ESC_PRE,), dtype=tl.int16)
        else:
            shift, cend, total, ent_p, val_p = 0, 0, 0, 0, 0
        return g0, g1, shift, cend, total, ent_p, val_p

    @triton.jit
    def _esc_add(acc, ent, val, em, n0, x_ptr, rm, m_ok, stride_xm, DOT_F32: tl.constexpr,
                 FMA: tl.constexpr, BN: tl.constexpr, ESC: tl.constexpr):
        """acc [BN, BM] += x[m, col] * value for raw escape entries (``_esc_load``) whose rows lie
        in [n0, n0 + BN). FMA (the GEMV): fp32 products of the exact value (exact in fp32)
        selected into their rows with where, so that a non-finite value reaches its own row
        only; else (the GEMM) one MMA of V [BN, ESC] (the values at their rows, zeros elsewhere)
        and X [ESC, BM] (the activations at their columns)."""
        v, r, ok, col = _esc_fields(ent, val, em, n0, BN)
        xg = tl.load(x_ptr + rm.to(tl.int64)[None, :] * stride_xm + col[:, None],
                     mask=ok[:, None] & m_ok[None, :], other=0.0)                  # [ESC, BM]
        hit = (tl.arange(0, BN)[:, None] == r[None, :]) & ok[None, :]            # [BN, ESC]
        if FMA:
            prod = xg.to(tl.float32) * (v.to(tl.uint32) << 16).to(tl.float32, bitcast=True)[:, None]
            acc += tl.sum(tl.where(hit[:, :, None], prod[None, :, :], 0.0), axis=1)
        else:
            vt = tl.where(hit, v.to(tl.bfloat16, bitcast=True)[None, :],
                          tl.zeros((BN, ESC), tl.bfloat16))
            acc = _mma(vt, xg, acc, DOT_F32)
        return acc

    @triton.jit
    def _esc_epilogue(acc, ent_p, val_p, shift, cend, total, n0, N, G, g0, g1, koff_ptr,
                      kent_ptr, kval_ptr, x_ptr, rm, m_ok, stride_xm, DOT_F32: tl.constexpr,
                      FMA: tl.constexpr, BN: tl.constexpr, IR: tl.constexpr, NRB: tl.constexpr,
                      WHOLE_K: tl.constexpr, ESC_CH: tl.constexpr, ESC_PRE: tl.constexpr):
        """Fast mode's escapes of one program (K range = groups g0..g1), added to acc with
        ``_esc_add``, its list (``_esc_table``) ESC_PRE (else ESC_CH) entries at a time; with
        ESC_PRE the list and its first ESC_PRE entries (ent_p, val_p) were loaded before the main
        loop. No split range is empty (``_plan``), so the main loop ran and they are there."""
        if ESC_PRE > 0:
            acc = _esc_add(acc, ent_p, val_p, tl.arange(0, ESC_PRE) < total, n0, x_ptr, rm, m_ok,
                           stride_xm, DOT_F32, FMA, BN, ESC_PRE)
            for v0 in range(ESC_PRE, total, ESC_PRE):
                ent, val, em = _esc_load(kent_ptr, kval_ptr, shift, cend, total, v0, 0, 0, 0,
                                         ESC_PRE)
                acc = _esc_add(acc, ent, val, em, n0, x_ptr, rm, m_ok, stride_xm, DOT_F32, FMA,
                               BN, ESC_PRE)
        else:
            shift, cend, total = _esc_table(koff_ptr, n0, N, G, g0, g1, IR, NRB, WHOLE_K)
            for v0 in range(0, total, ESC_CH):
                ent, val, em = _esc_load(kent_ptr, kval_ptr, shift, cend, total, v0, 0, 0, 0,
                                         ESC_CH)
                acc = _esc_add(acc, ent, val, em, n0, x_ptr, rm, m_ok, stride_xm, DOT_F32, FMA,
                               BN, ESC_CH)
        return acc

    @triton.jit
    def _store_out(y_ptr, ws_ptr, lock_ptr, out, y_off, out_ok, M, N, SPLIT_K, pid_k, pid_m,
                   pid_n, USE_SPLIT: tl.constexpr):
        """Store the fp32 tile ``out`` as bf16 at ``y_off``. USE_SPLIT: through the split-K
        workspace: each program stores its partial, takes a ticket on its output tile's counter,
        and the last one sums the partials in split order, stores, and resets the counter."""
        if USE_SPLIT:
            mn = M.to(tl.int64) * N
            tl.store(ws_ptr + pid_k * mn + y_off, out, mask=out_ok)
            tl.debug_barrier()  # every thread's partial is written before the ticket is taken
            lock = lock_ptr + pid_m * tl.num_programs(0) + pid_n
            ticket = tl.atomic_add(lock, 1, sem="acq_rel", scope="gpu")
            if ticket == SPLIT_K - 1:
                tot = tl.load(ws_ptr + y_off, mask=out_ok, other=0.0, cache_modifier=".cg")
                for s in range(1, SPLIT_K):
                    tot += tl.load(ws_ptr + s * mn + y_off, mask=out_ok, other=0.0,
                                   cache_modifier=".cg")
                tl.store(y_ptr + y_off, tot.to(tl.bfloat16), mask=out_ok)
                tl.atomic_xchg(lock, 0)
        else:
            tl.store(y_ptr + y_off, out.to(tl.bfloat16), mask=out_ok)

    # M, G and the split values would otherwise be specialized (== 1, % 16), each a new compile
    @triton.jit(do_not_specialize=["M", "G", "SPLIT_K", "STEPS_PER_SPLIT"])
    def _gemm_kernel(x_ptr, y_ptr, ws_ptr, lock_ptr, w_ptr, h_ptr, hb_ptr, koff_ptr, kent_ptr,
                     kval_ptr, M, N, K, HALF, G, stride_xm, stride_w, stride_h, SPLIT_K,
                     STEPS_PER_SPLIT,
                     W12: tl.constexpr, HB_PER_ROW: tl.constexpr, ESC_MODE: tl.constexpr,
                     USE_SPLIT: tl.constexpr, EVEN_K: tl.constexpr, DOT_F32: tl.constexpr,
                     PTX: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                     IR: tl.constexpr, NRB: tl.constexpr, CARRY: tl.constexpr,
                     ESC_CH: tl.constexpr, ESC_PRE: tl.constexpr):
        """y[M, N] = x[M, K] @ W[N, K]^T; W from W12 planes (W12) or a bf16 matrix (w_ptr).

        ESC_MODE (W12 only): 1 = escapes added in the epilogue, 2 = patched into the tiles.
        IR: the escape index's row block (``W12Planes.idx_rows``), NRB = cdiv(BN, IR).
        ESC_PRE > 0 (ESC_MODE 1): the epilogue's escape list (``_esc_table``) and its first
        ESC_PRE entries are loaded before the main loop, as in gemv._gemv_kernel (each epilogue chunk is an
        index load and a dependent x gather, a chain of round trips after the loop otherwise).
        Grid: (cdiv(N, BN), SPLIT_K, cdiv(M, BM)); program s of SPLIT_K owns K steps
        [s * STEPS_PER_SPLIT, (s + 1) * STEPS_PER_SPLIT) of BK pair columns.
        """
        pid_n = tl.program_id(0)
        pid_k = tl.program_id(1)
        pid_m = tl.program_id(2)
        n0 = pid_n * BN
        rn = n0 + tl.arange(0, BN)
        rm = pid_m * BM + tl.arange(0, BM)
        rk = tl.arange(0, BK)
        n_ok = rn < N
        m_ok = rm < M
        s0 = pid_k * STEPS_PER_SPLIT
        s1 = tl.minimum(s0 + STEPS_PER_SPLIT, tl.cdiv(HALF, BK))
        w_tile = w_ptr + rn.to(tl.int64)[:, None] * stride_w + rk[None, :]      # [BN, BK]
        x_tile = x_ptr + rm.to(tl.int64)[None, :] * stride_xm + rk[:, None]     # [BK, BM]
        if W12:
            h_tile = h_ptr + rn.to(tl.int64)[:, None] * stride_h + rk[None, :]
            hbt = _hb_tile(hb_ptr, rn, n_ok, BK, HB_PER_ROW)
            # ESC_PRE: the epilogue's first entries in flight during the main loop
            g0, g1, shift, cend, total, ent_p, val_p = _esc_prologue(
                koff_ptr, kent_ptr, kval_ptr, n0, N, G, s0, s1, BK, IR, NRB, not USE_SPLIT,
                ESC_PRE if ESC_MODE == 1 else 0, True)
        acc = tl.zeros((BN, BM), dtype=tl.float32)
        if W12 and CARRY:
            # the decoded tiles are carried into the next iteration: a loop-carried dot operand
            # goes to shared memory in the MMA layout (wide stores) and wgmma reads it there, and
            # step s+1's decode overlaps step s's MMAs. Decoded in place for the dot (CARRY off),
            # the tile takes a register-layout conversion per step instead.
            c0, c1 = _w12_tile(w_tile, h_tile, hbt, s0 * BK, n_ok, rk, koff_ptr, kent_ptr,
                               kval_ptr, n0, N, HALF, G, EVEN_K, ESC_MODE, PTX, BN, BK, IR, NRB)
            for s in range(s0, s1):
                j = s * BK
                x0, x1 = _x_tiles(x_tile, j, rk, m_ok, K, HALF, EVEN_K)
                nxt = tl.minimum(j + BK, (s1 - 1) * BK)   # the last step reloads its own tile
                n0_, n1_ = _w12_tile(w_tile, h_tile, hbt, nxt, n_ok, rk, koff_ptr, kent_ptr,
                                     kval_ptr, n0, N, HALF, G, EVEN_K, ESC_MODE, PTX, BN, BK, IR,
                                     NRB)
                acc = _mma(c0, x0, acc, DOT_F32)
                acc = _mma(c1, x1, acc, DOT_F32)
                c0 = n0_
                c1 = n1_
        elif W12:
            for s in range(s0, s1):
                j = s * BK
                x0, x1 = _x_tiles(x_tile, j, rk, m_ok, K, HALF, EVEN_K)
                w0, w1 = _w12_tile(w_tile, h_tile, hbt, j, n_ok, rk, koff_ptr, kent_ptr,
                                   kval_ptr, n0, N, HALF, G, EVEN_K, ESC_MODE, PTX, BN, BK, IR, NRB)
                acc = _mma(w0, x0, acc, DOT_F32)
                acc = _mma(w1, x1, acc, DOT_F32)
        else:
            for s in range(s0, s1):
                j = s * BK
                if EVEN_K:
                    w_m0 = n_ok[:, None]
                    w_m1 = n_ok[:, None]
                else:
                    k0 = j + rk
                    w_m0 = n_ok[:, None] & ((k0 < HALF) & (k0 < K))[None, :]
                    w_m1 = n_ok[:, None] & ((k0 < HALF) & (k0 + HALF < K))[None, :]
                w0 = tl.load(w_tile + j, mask=w_m0, other=0.0, eviction_policy="evict_first")
                w1 = tl.load(w_tile + HALF + j, mask=w_m1, other=0.0, eviction_policy="evict_first")
                x0, x1 = _x_tiles(x_tile, j, rk, m_ok, K, HALF, EVEN_K)
                acc = _mma(w0, x0, acc, DOT_F32)
                acc = _mma(w1, x1, acc, DOT_F32)

        if W12 and ESC_MODE == 1:   # epilogue: out[m, n] += x[m, col] * value per escape
            acc = _esc_epilogue(acc, ent_p, val_p, shift, cend, total, n0, N, G, g0, g1,
                                koff_ptr, kent_ptr, kval_ptr, x_ptr, rm, m_ok, stride_xm, DOT_F32,
                                False, BN, IR, NRB, not USE_SPLIT, ESC_CH, ESC_PRE)

        _store_out(y_ptr, ws_ptr, lock_ptr, acc, rm.to(tl.int64)[None, :] * N + rn[:, None],
                   m_ok[None, :] & n_ok[:, None], M, N, SPLIT_K, pid_k, pid_m, pid_n, USE_SPLIT)

    @triton.jit
    def _decode_kernel(l_ptr, h_ptr, hb_ptr, koff_ptr, kent_ptr, kval_ptr, out_ptr,
                       N, K, HALF, G, stride_l, stride_h, stride_o,
                       HB_PER_ROW: tl.constexpr, PTX: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr, IR: tl.constexpr, NRB: tl.constexpr):
        """out[N, K] bf16 = the exact weights: the GEMM's tile decode (``_w12_tile``, escapes
        patched in) per tile."""
        n0 = tl.program_id(0) * BN
        j = tl.program_id(1) * BK
        rn = n0 + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        rows = rn.to(tl.int64)[:, None]
        hbt = _hb_tile(hb_ptr, rn, rn < N, BK, HB_PER_ROW)
        w0, w1 = _w12_tile(l_ptr + rows * stride_l + rk[None, :], h_ptr + rows * stride_h + rk[None, :],
                           hbt, j, rn < N, rk, koff_ptr, kent_ptr, kval_ptr, n0, N, HALF, G,
                           False, 2, PTX, BN, BK, IR, NRB)
        k0 = j + rk
        ok = (rn[:, None] < N) & (k0 < HALF)[None, :]
        tl.store(out_ptr + rows * stride_o + k0[None, :], w0, mask=ok & (k0 < K)[None, :])
        tl.store(out_ptr + rows * stride_o + HALF + k0[None, :], w1,
                 mask=ok & (k0 + HALF < K)[None, :])

    INTERPRET = type(_gemm_kernel).__name__ == "InterpretedFunction"
else:
    INTERPRET = False


# ---------------------------------------------------------------------------------------------
# Configs and tuning
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GemmConfig:
    """Tiling of ``_gemm_kernel``: BLOCK_M activation rows, BLOCK_N weight rows, BLOCK_K pair
    columns per step (the tile covers 2 * block_k columns of K), split_k K-ranges."""
    block_m: int
    block_n: int
    block_k: int
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 3
    carry: bool = True  # W12: decoded tiles carried to the next step (see _gemm_kernel)
    esc_pre: int = 0    # W12 fast mode: escape entries loaded before the loop

    def __post_init__(self):
        sizes = (self.block_m, self.block_n, self.block_k)
        if any(b & (b - 1) for b in sizes) or min(sizes) < 16 or self.block_k < GROUP:
            raise ValueError(f"invalid GemmConfig {self}: block sizes must be powers of two, "
                             f"block_m and block_n >= 16, block_k >= {GROUP}")
        if self.esc_pre not in ESC_PRE_VALUES or self.block_n > IDX_SPAN:
            raise ValueError(f"invalid GemmConfig {self}: esc_pre must be one of "
                             f"{ESC_PRE_VALUES}, block_n at most {IDX_SPAN}")


# interpreter / CPU: small tiles, split-K on so the tests cover the ticketed reduction
INTERPRETER_CONFIG = GemmConfig(block_m=16, block_n=32, block_k=32, split_k=2, num_warps=4,
                                num_stages=1)
M_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
_TUNED: dict = {}  # _tune_key -> GemmConfig; gemv._tune_key ("gemv-..." keys) -> gemv.GemvConfig
_TUNE_FILE_LOADED = False
GEMV_KEY_PREFIX = "gemv-"  # tune cache / file keys of gemv.py's configs (GEMM keys: "w12|...")
MMA_KEY_PREFIX = "mma-"    # and of mma.py's


def m_bucket(M: int) -> int:
    """Tuning bucket of M: the next power of two up to 64; 128 stands for every M > 64."""
    for b in M_BUCKETS:
        if M <= b:
            return b
    return 128


def _block_m(M: int) -> int:
    return 16 if M <= 16 else 32 if M <= 32 else 64


def _num_sms(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def _pick_split(tiles: int, steps: int, n_sm: int) -> int:
    """Smallest power-of-two split giving >= 2 programs per SM, keeping >= 4 K-steps per split."""
    s = 1
    while tiles * s < 2 * n_sm and steps // (2 * s) >= 4 and s < 32:
        s *= 2
    return s


def _block_k(want: int, K: int) -> int:
    """``want`` pair columns per step, or less for short K (a power of two >= GROUP)."""
    half = _cdiv(K, 32) * 16
    return min(want, max(GROUP, 1 << (half - 1).bit_length()))


def default_config(M: int, N: int, K: int, n_sm: int = 132) -> GemmConfig:
    """Untuned GPU config (used while capturing a CUDA graph or with autotuning off)."""
    bm = _block_m(M)
    bk = _block_k(128 if K >= 1024 else 64, K)
    tiles = _cdiv(N, 64) * _cdiv(M, bm)
    split = _pick_split(tiles, _cdiv(_cdiv(K, 32) * 16, bk), n_sm)
    if bm == 16 and bk == 128:  # W12: in place over 3 stages, the sweep's winner on the wide
        return GemmConfig(bm, 64, bk, split, 4, 3, False)  # layers (carried tiles want 2 stages)
    return GemmConfig(bm, 64, bk, split, 4, 3 if bm == 64 else 4)


def candidate_configs(M: int, N: int, K: int, n_sm: int = 132, kind: str = "w12") -> list:
    """The autotune space for one shape (kept small: every tiling is a separate compile, and the
    GPU bench must tune ~150 problems in a few minutes). bf16: 3 tilings x 2 split-K values. W12:
    the tilings that won an H200 sweep of 132 configs (docs/benchmarks/w12.md): BLOCK_N 64 with
    BLOCK_K 128, 4 warps, either the decoded tiles carried over 2 stages or decoded in place over
    3, at 1x / 2x / 4x the split-K that fills the GPU, plus BLOCK_K 64 and the large-M tiling;
    the BLOCK_N 64 ones both with the escape entries read after the main loop and before it
    (esc_pre ``ESC_PRE_CAND``)."""
    bm = _block_m(M)
    if kind == "w12":
        bases = [(64, 128, 4, 2, True), (64, 128, 4, 3, False), (64, 64, 4, 3, True),
                 (128, 64, 8, 3, False)]
        mults = (1, 2, 4) if M <= 32 else (1, 2)
    else:
        bases = [(64, 64, 4, 4 if bm == 16 else 3, True), (64, 128, 4, 3, True),
                 (128, 64, 8, 3, True)]
        mults = (1, 2)
    out = {}
    for bn, bk, warps, stages, carry in bases:
        bk = _block_k(bk, K)
        if bn == 128 and M <= 32:
            continue
        s = _pick_split(_cdiv(N, bn) * _cdiv(M, bm), _cdiv(_cdiv(K, 32) * 16, bk), n_sm)
        for mult in mults:
            for pre in (0, ESC_PRE_CAND) if kind == "w12" and bn == 64 else (0,):
                out[GemmConfig(bm, bn, bk, min(mult * s, 32), warps, stages, carry, pre)] = None
    return list(out)


@functools.lru_cache(maxsize=None)
def _gpu_name(index: int) -> str:
    return torch.cuda.get_device_name(index).replace(" ", "_")


def _tune_key(kind: str, M: int, N: int, K: int, device) -> str:
    """Cache key: kind, GPU model, M bucket, N, K."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"{kind}|{_gpu_name(index)}|m{m_bucket(M)}|n{N}|k{K}"


def clear_tuning() -> None:
    """Forget the tuned configs (GEMM and GEMV) held in memory (a tune file already read is not
    read again). Needed before comparing two kinds at their default configs after either was
    tuned."""
    _TUNED.clear()


def load_tuning(path: str) -> int:
    """Merge a JSON tuning file (written by ``save_tuning``) into the in-memory cache: GEMM
    entries as ``GemmConfig``, "gemv-" entries as ``gemv.GemvConfig``, "mma-" entries as
    ``mma.MmaConfig`` (or ``ws.WsConfig`` where they have its ``ws_`` fields: the few-row tuner
    picks between both kernels), "wg-" entries as ``wgmma.WgConfig``. A malformed entry is a
    ValueError naming the file and the key (nothing is merged then)."""
    from .gemv import GemvConfig  # gemv.py and mma.py import this module
    from .mma import MmaConfig
    from .wgmma import KEY_PREFIX as WG_KEY_PREFIX, WgConfig
    from .ws import WsConfig
    with open(path) as f:
        data = json.load(f)
    loaded = {}
    for key, cfg in data.items():
        cls = (GemvConfig if key.startswith(GEMV_KEY_PREFIX)
               else (WsConfig if isinstance(cfg, dict) and "ws_stages" in cfg else MmaConfig)
               if key.startswith(MMA_KEY_PREFIX)
               else WgConfig if key.startswith(WG_KEY_PREFIX) else GemmConfig)
        try:
            loaded[key] = cls(**cfg)
        except (TypeError, ValueError) as e:
            raise ValueError(f"W12 tune file {path}: bad {cls.__name__} entry {key!r}: {e}") from e
    _TUNED.update(loaded)
    return len(loaded)


def save_tuning(path: str) -> None:
    """Write the in-memory tuning cache as JSON (merged with what the file already holds)."""
    data = {}
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
    data.update({k: asdict(v) for k, v in _TUNED.items()})
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _maybe_load_tune_file() -> None:
    global _TUNE_FILE_LOADED
    path = os.environ.get("SPECPILOT_W12_TUNE_FILE")
    if not _TUNE_FILE_LOADED and path and os.path.exists(path):
        load_tuning(path)
    _TUNE_FILE_LOADED = True


def cached_or_tuned(key: str, tune, default):
    """The config cached under ``key`` (in memory, or read from $SPECPILOT_W12_TUNE_FILE on first
    use); else ``tune()`` when ``autotune_enabled()``; else ``default()``. The GEMV's and the
    Gluon kernel's tuners share it."""
    _maybe_load_tune_file()
    cfg = _TUNED.get(key)
    if cfg is not None:
        return cfg
    return tune() if autotune_enabled() else default()


def _remember(key: str, cfg) -> None:
    """Cache a tuned config (GEMM or GEMV) in memory and, with $SPECPILOT_W12_TUNE_FILE, in it."""
    _TUNED[key] = cfg
    path = os.environ.get("SPECPILOT_W12_TUNE_FILE")
    if path:
        save_tuning(path)


TUNE_RING_BYTES = 512 << 20  # weight bytes rotated while timing a candidate (~10x the H200's L2)
TUNE_MAX_COPIES = 16


def weight_bytes(w) -> int:
    """Bytes a GEMM streams for ``w``: W12 planes and escape entries, or the bf16 matrix."""
    if isinstance(w, W12Planes):
        return sum(t.numel() * t.element_size() for t in (w.L, w.H, w.kent, w.kval))
    return w.numel() * w.element_size()


def weight_ring(w, target_bytes: int = TUNE_RING_BYTES, min_copies: int = 2,
                max_copies: int = TUNE_MAX_COPIES) -> list:
    """``w`` plus copies, enough that one pass over them streams >= ``target_bytes`` (at least
    ``min_copies``, at most ``max_copies``), so a timing loop cannot find the weights in L2. A
    W12 copy has its own escape index and bases too: in a decode step they come from HBM like
    the planes, and a kernel that waits on them must not be timed with them in L2."""
    n = min(max_copies, max(min_copies, _cdiv(target_bytes, max(1, weight_bytes(w)))))
    if isinstance(w, W12Planes):
        return [w] + [_planes_copy(w) for _ in range(n - 1)]
    return [w] + [w.clone() for _ in range(n - 1)]


def _planes_copy(w: W12Planes) -> W12Planes:
    """A copy of ``w`` in new memory: planes, bases and escape index (and its ``tc`` on the copy's
    planes, with its own index)."""
    L, H, hb = w.L.clone(), w.H.clone(), w.hb.clone()
    tc = None if w.tc is None else replace(w.tc, L=L, H=H, hb=hb, koff=w.tc.koff.clone(),
                                           kent=w.tc.kent.clone(), kval=w.tc.kval.clone())
    return replace(w, L=L, H=H, hb=hb, koff=w.koff.clone(), kent=w.kent.clone(),
                   kval=w.kval.clone(), tc=tc)


def time_calls_us(fn, n: int, reps: int = 5) -> float:
    """Microseconds per call of ``fn(i)``, i rotating over range(n): one CUDA graph of at least 24
    calls, replayed ``reps`` times after a warm-up, median. The graph removes the launch cost that
    would otherwise hide the kernel (tens of us per Triton launch); ``fn`` must have run eagerly
    once (compiles, split-K counters)."""
    calls = n * _cdiv(24, n)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for c in range(calls):
            fn(c % n)
    return replay_ms(graph, reps) * 1000.0 / calls


def replay_ms(graph, reps: int) -> float:
    """Median milliseconds of ``reps`` replays of a captured CUDA graph, after one warm-up."""
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def fastest(cands, make_fn, n: int, what: str):
    """The candidate c whose ``make_fn(c)`` (a function of the ring index 0..n-1) times fastest
    with ``time_calls_us``. Candidates that fail to run (e.g. too much shared memory) are
    skipped with a warning; none running is an error."""
    best, best_t = None, math.inf
    for cfg in cands:
        fn = make_fn(cfg)
        try:
            fn(0)
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run is skipped, not fatal
            warnings.warn(f"W12 autotune: {what}: {cfg} failed: {e}")
            continue
        t = time_calls_us(fn, n)
        if t < best_t:
            best, best_t = cfg, t
    if best is None:
        raise RuntimeError(f"W12 autotune: no candidate ran for {what}")
    return best


def autotune_enabled() -> bool:
    """Tune now: $SPECPILOT_W12_AUTOTUNE != "0" and no CUDA graph being captured."""
    return (os.environ.get("SPECPILOT_W12_AUTOTUNE", "1") != "0"
            and not torch.cuda.is_current_stream_capturing())


def autotune(kind: str, x: torch.Tensor, w, candidates=None) -> GemmConfig:
    """Time each candidate on (x, w) and cache the fastest under (kind, GPU, M bucket, N, K).

    Timing is what a decode step sees: a CUDA graph of back-to-back calls rotating over copies of
    the weight (``weight_ring``, >= 512 MB in all), so the weights come from HBM and launches cost
    nothing. ``triton.testing.do_bench`` (an L2 flush before every eager call) ranked configs
    differently from such replays on the H200 (docs/benchmarks/w12.md). ``kind`` is "w12" (w:
    W12Planes, fast mode) or "bf16" (w: bf16 [N, K]). Candidates that fail to compile (e.g. too
    much shared memory) are skipped with a warning.
    """
    M, K = x.shape
    N = w.N if kind == "w12" else w.shape[0]
    cands = candidates or candidate_configs(M, N, K, _num_sms(x.device), kind)
    ring = weight_ring(w)
    w12 = kind == "w12"
    best = fastest(cands, lambda c: lambda i: _launch(x, ring[i], c, w12, 1 if w12 else 0),
                   len(ring), f"{kind} M={M} N={N} K={K}")
    _remember(_tune_key(kind, M, N, K, x.device), best)
    return best


def get_config(kind: str, x: torch.Tensor, w, tune: bool = True) -> GemmConfig:
    """Config for (kind, x, w): interpreter -> ``INTERPRETER_CONFIG``; GPU -> the tuned one,
    tuning now if ``tune`` (and not capturing a CUDA graph and $SPECPILOT_W12_AUTOTUNE != "0"),
    else ``default_config``."""
    if not x.is_cuda:
        return INTERPRETER_CONFIG
    _maybe_load_tune_file()
    M, K = x.shape
    N = w.N if kind == "w12" else w.shape[0]
    cfg = _TUNED.get(_tune_key(kind, M, N, K, x.device))
    if cfg is not None:
        return cfg
    if tune and autotune_enabled():
        return autotune(kind, x, w)
    return default_config(M, N, K, _num_sms(x.device))


# ---------------------------------------------------------------------------------------------
# Launchers
# ---------------------------------------------------------------------------------------------

_LOCKS: dict = {}
_OUTGROWN: list = []   # counters replaced by larger ones, kept: captured graphs still use them


def _locks(device: torch.device, n: int) -> torch.Tensor:
    """Zeroed split-K ticket counters for ``n`` output tiles (every launch leaves them at zero).

    One buffer per device, shared by all split-K launches: they must not run concurrently on two
    streams of one device (a CUDA graph replayed on the stream of the eager calls is fine). A
    launch needing more counters gets a larger buffer; the smaller one is never freed, since a
    CUDA graph captured with it keeps its address (freed, its memory would go to another tensor
    that the graph's replays then count into)."""
    buf = _LOCKS.get(str(device))
    if buf is None or buf.numel() < n:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("W12 split-K counters must exist before CUDA graph capture: run the "
                               "GEMM once eagerly first")
        if buf is not None:
            _OUTGROWN.append(buf)
        buf = torch.zeros(max(n, 1 << 14), dtype=torch.int32, device=device)
        _LOCKS[str(device)] = buf
    return buf


def weight_kind(w) -> tuple:
    """("w12", N, K) for W12Planes, ("bf16", N, K) for a bf16 [N, K] weight."""
    return ("w12", w.N, w.K) if isinstance(w, W12Planes) else ("bf16", *w.shape)


def kind_tune_key(prefix: str, x: torch.Tensor, w) -> str:
    """Tune cache / file key of the Gluon kernels (mma.py "mma-", wgmma.py "wg-"): prefix + the
    weight's kind (w12 / bf16), GPU model, M (exact, not bucketed), N, K."""
    kind, N, K = weight_kind(w)
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return f"{prefix}{kind}|{_gpu_name(index)}|m{x.shape[0]}|n{N}|k{K}"


def split_buffers(y: torch.Tensor, split: int, blocks: int) -> tuple:
    """(workspace, tickets) of a launch writing y [M, N] from ``split`` programs per row block
    (``blocks`` of them): fp32 [split, M, N] partials and the shared counters (``_locks``), or
    y twice (not read) without split-K. The Gluon kernels' launchers (mma.py, wgmma.py)."""
    if split <= 1:
        return y, y
    ws = torch.empty((split,) + tuple(y.shape), dtype=torch.float32, device=y.device)
    return ws, _locks(y.device, blocks)


def _ptx_decode() -> bool:
    """Decode with the inline PTX (GPU default) or with plain Triton ops (interpreter, or
    $SPECPILOT_W12_PTX=0 to compare)."""
    return not INTERPRET and os.environ.get("SPECPILOT_W12_PTX", "1") != "0"


def _check_device(*tensors) -> None:
    """Interpreter: CPU tensors only; compiled kernels: Triton present and CUDA tensors only."""
    if INTERPRET:
        if any(t.is_cuda for t in tensors):
            raise RuntimeError("TRITON_INTERPRET=1: the W12 kernels run on CPU tensors only")
    elif not HAS_TRITON:
        raise RuntimeError("the W12 kernels need Triton (pip install triton)")
    elif not all(t.is_cuda for t in tensors):
        raise RuntimeError("the W12 kernels need CUDA tensors (or TRITON_INTERPRET=1 on CPU)")


@dataclass
class _Plan:
    """What a launch of the GEMM or of the GEMV (gemv.py) needs besides its tiling: the weight
    operands (w, h, hb, koff, kent, kval) and their row strides, N, Kp, the pair columns half,
    the split-K plan, the grid, the output y and the split-K workspace and counters."""
    ops: tuple
    stride_w: int
    stride_h: int
    N: int
    Kp: int
    half: int
    split: int
    per_split: int
    grid: tuple
    y: torch.Tensor
    ws: torch.Tensor
    locks: torch.Tensor
    ir: int     # the escape index's row block (W12Planes.idx_rows; any for bf16)


def _plan(x: torch.Tensor, w, cfg, w12: bool) -> _Plan:
    """The launch plan of x [M, K] with ``w`` (W12Planes when w12, else bf16 [N, K]) for a
    config with block_n, block_k, split_k and block_m (GemmConfig or gemv.GemvConfig)."""
    M, K = x.shape
    if w12:
        N, Kp = w.N, w.Kp
        ops = (w.L, w.H, w.hb, w.koff, w.kent, w.kval)
        stride_w, stride_h = w.L.stride(0), w.H.stride(0)
        _check_device(x, w.L)
    else:
        N, Kp = w.shape[0], _cdiv(K, 32) * 32
        ops = (w,) * 6
        stride_w, stride_h = w.stride(0), 0
        _check_device(x, w)
    half = Kp // 2
    steps = _cdiv(half, cfg.block_k)
    per_split = _cdiv(steps, cfg.split_k)
    split = _cdiv(steps, per_split)                 # no empty split ranges
    grid = (_cdiv(N, cfg.block_n), split, _cdiv(M, cfg.block_m))
    y = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)
    if split > 1:
        ws = torch.empty((split, M, N), dtype=torch.float32, device=x.device)
        locks = _locks(x.device, grid[0] * grid[2])
    else:
        ws = locks = y
    return _Plan(ops, stride_w, stride_h, N, Kp, half, split, per_split, grid, y, ws, locks,
                 w.idx_rows if w12 else IDX_ROWS)


def _launch(x: torch.Tensor, w, cfg: GemmConfig, w12: bool, esc_mode: int) -> torch.Tensor:
    """Run ``_gemm_kernel`` with ``cfg``. ``w``: W12Planes (w12) or bf16 [N, K] (not w12)."""
    M, K = x.shape
    p = _plan(x, w, cfg, w12)
    _gemm_kernel[p.grid](
        x, p.y, p.ws, p.locks, *p.ops,
        M, p.N, K, p.half, _cdiv(p.half, GROUP), x.stride(0), p.stride_w, p.stride_h, p.split,
        p.per_split,
        W12=w12, HB_PER_ROW=w12 and w.per_row, ESC_MODE=esc_mode, USE_SPLIT=p.split > 1,
        EVEN_K=(p.Kp == K and p.half % cfg.block_k == 0), DOT_F32=INTERPRET, PTX=_ptx_decode(),
        BM=cfg.block_m, BN=cfg.block_n, BK=cfg.block_k, IR=p.ir, NRB=_cdiv(cfg.block_n, p.ir),
        CARRY=w12 and cfg.carry, ESC_CH=ESC_CHUNK,
        ESC_PRE=cfg.esc_pre if w12 and esc_mode == 1 else 0, num_warps=cfg.num_warps,
        num_stages=cfg.num_stages)
    return p.y


def _as_2d_bf16(x: torch.Tensor, K: int) -> torch.Tensor:
    if x.dim() != 2 or x.shape[1] != K or x.dtype != torch.bfloat16:
        raise ValueError(f"expected x bf16 [M, {K}], got {x.dtype} {tuple(x.shape)}")
    return x if x.stride(1) == 1 else x.contiguous()


def w12_matmul(x: torch.Tensor, w, *, reproducible: bool = False, config: GemmConfig | None = None
               ) -> torch.Tensor:
    """``x @ W^T`` (bf16 ``[M, N]``, fp32 accumulation) for x bf16 ``[M, K]`` and a W12 weight.

    ``w``: ``W12Planes`` (or a ``W12Tensor``, prepared on the fly: slow, for tools and tests).
    ``reproducible``: escapes patched into the tiles, so the result equals
    ``bf16_matmul(x, decode(w), config=same config)`` bit for bit; otherwise they are added in the
    epilogue (exact products, fp32 rounding order differs). ``config``: fixed tiling (default:
    ``get_config``). Fast mode with no config on CUDA: M > ``DECODE_THEN_MATMUL_M`` decodes the
    weight and calls ``torch.matmul``; ``MMA_MIN_M`` <= M <= ``MMA_MAX_M`` runs ``mma.w12_mma``
    (tuned) where Gluon is available and K % 8 == 0; else M <= ``GEMV_MAX_M`` ``gemv.w12_gemv``
    (tuned); with ``$SPECPILOT_W12_WS32=1`` 17 <= M <= ``ws.MAX_M`` on an sm_90 GPU the
    warp-specialized kernel (``mma.w12_mma``, tuned over ``ws.CANDIDATES32``; off by default:
    0.71-0.79x of cuBLAS bf16 on the H200, session 49); with ``$SPECPILOT_W12_WGMMA=1``
    ``WGMMA_MIN_M`` <= M <= ``wgmma.MAX_M`` on an sm_90 GPU ``wgmma.w12_wgmma`` (tuned; off by
    default: slower than cuBLAS bf16, docs/w12.md).
    """
    planes = w if isinstance(w, W12Planes) else prepare(w, x.device)
    x = _as_2d_bf16(x, planes.K)
    if x.shape[0] == 0:
        return x.new_empty((0, planes.N))
    if config is None and not reproducible and x.is_cuda:
        if x.shape[0] > DECODE_THEN_MATMUL_M:
            return torch.matmul(x, decode_w12_gpu(planes).t())
        from . import mma
        M = x.shape[0]
        if MMA_MIN_M <= M <= MMA_MAX_M and mma.mma_supported(M, planes.K):
            return mma.w12_mma(x, planes)
        from . import ws
        if MMA_MAX_M < M <= ws.MAX_M and ws.ws32_enabled() and ws.supported(M, planes.K,
                                                                            x.device):
            return mma.w12_mma(x, planes)   # (tuned over ws.CANDIDATES32)
        from . import wgmma
        if (wgmma.enabled() and WGMMA_MIN_M <= M <= wgmma.MAX_M
                and wgmma.supported(M, planes.K, x.device)):
            return wgmma.w12_wgmma(x, planes)
        if M <= GEMV_MAX_M:
            from .gemv import w12_gemv
            return w12_gemv(x, planes)
    if planes.tc is not None:   # the tensor-core GEMM's own escape index (W12Planes.tc)
        planes = planes.tc
    cfg = config or get_config("w12", x, planes)
    return _launch(x, planes, cfg, True, 2 if reproducible else 1)


def bf16_matmul(x: torch.Tensor, w: torch.Tensor, *, config: GemmConfig | None = None) -> torch.Tensor:
    """``x @ w^T`` with the W12 GEMM's template and the weight tile loaded as bf16 (the baseline
    and the bit-exact reference of ``w12_matmul(reproducible=True)``). w: bf16 ``[N, K]``."""
    if w.dim() != 2 or w.dtype != torch.bfloat16:
        raise ValueError(f"expected w bf16 [N, K], got {w.dtype} {tuple(w.shape)}")
    w = w if w.stride(1) == 1 else w.contiguous()
    x = _as_2d_bf16(x, w.shape[1])
    if x.shape[0] == 0:
        return x.new_empty((0, w.shape[0]))
    return _launch(x, w, config or get_config("bf16", x, w), False, 0)


def decode_w12_gpu(w, block_n: int = 32, block_k: int = 128) -> torch.Tensor:
    """Decode a W12 weight with the kernels' decode routine -> bf16 ``[N, K]`` on its device.

    ``w``: ``W12Planes`` or ``W12Tensor`` (prepared on its own device).
    """
    p = w if isinstance(w, W12Planes) else prepare(w)
    _check_device(p.L)
    half = p.Kp // 2
    block_k = _block_k(block_k, p.Kp)
    out = torch.empty((p.N, p.K), dtype=torch.bfloat16, device=p.device)
    grid = (_cdiv(p.N, block_n), _cdiv(half, block_k))
    _decode_kernel[grid](p.L, p.H, p.hb, p.koff, p.kent, p.kval, out, p.N, p.K, half,
                         _cdiv(half, GROUP), p.L.stride(0), p.H.stride(0), out.stride(0),
                         HB_PER_ROW=p.per_row, PTX=_ptx_decode(), BN=block_n, BK=block_k,
                         IR=p.idx_rows, NRB=_cdiv(block_n, p.idx_rows), num_warps=4)
    return out
