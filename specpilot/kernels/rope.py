"""Rotary position embedding of q and k in one Triton launch (layers/rotary.py, rotate_half layout).

Numerics follow RotaryEmbedding.rotate step by step, rounding where torch rounds: with x's dtype
dt and the fp32 tables of RotaryEmbedding,
  cos = cos_table[pos].to(dt), sin = sin_table[pos].to(dt)
  a = (x * cos).to(dt), b = (rotate_half(x) * sin).to(dt), out = (a + b).to(dt)
over the first R = rotary_dim channels (rotate_half(x) = cat(-x2, x1) of those R channels); the
channels R..D-1 are copied unchanged. Products of two 16-bit values are exact in fp32 and the
sum of two 16-bit values is rounded once to fp32 and then to dt, as torch's fp32-opmath kernels do,
so 16-bit results equal torch's bit for bit; in fp32 they are equal too as long as the compiler
does not contract x * cos + b into an fma, which the launch forbids (enable_fp_fusion=False).
With q_scale s (Muse-Glimmer's query gain), q's heads are first x = (x * s).to(dt), s passed as an
fp32 scalar: torch's `q * s` for a python float s (s cast to fp32, an fp32 multiply, one rounding
to dt); they are rotated from there (channels R..D-1 get the scaled x). k is never scaled.

With q_norm / k_norm (the attention's per-head RMSNorm of q / k, folded in: three launches
become one), each head is first normalised as kernels/norm.py normalises a row (one factor per
head from its sum of squares, the style's gain, rounded to x's dtype), its rotate_half partner
channel with the same factor; then the scale and the rotation as above. The sum of squares runs
in another order than the norm kernel's, so 16-bit results land an ulp apart now and then.

Grid (T, head blocks): program (t, j) rotates BLOCK_H heads of token t, of q for the first
cdiv(Hq, BLOCK_H) blocks and of k after them, sharing token t's cos / sin row. q and k are read
through (token, head) strides, so views split from a fused qkv output are read in place; the
outputs are new contiguous tensors, the inputs are not modified. Positions are not range-checked
(that would need a device-to-host sync): they must lie in [0, max_positions) of the tables.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specpilot.kernels import pdl

from specpilot.kernels.norm import _NO_WEIGHT, _PLAIN, _gain, _rms_factor

MAX_HEAD_DIM = 8192
_TILE = 2048  # elements (heads x padded head dim) one program handles


@triton.jit
def _rotate_heads(x_ptr, out_ptr, cos, sin, scale, t, h0, H, stride_t, stride_h, D, R,
                  w_ptr, eps, inv_d, NORM: tl.constexpr,
                  SCALED: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    """Rotates heads h0 .. h0 + BLOCK_H - 1 (< H) of token t. NORM >= 0: each head first goes
    through a per-head RMSNorm of that style (kernels/norm.py: 0 plain, 1 zero-centred, 3 fp32
    weight, 4 none; weight w_ptr [D]), rounded to x's dtype as the norm's own launch rounds it.
    SCALED: then times the fp32 scalar scale, rounded to x's dtype. cos / sin: fp32 [BLOCK_D],
    zero from R on. out is contiguous [T, H, D]."""
    dt = x_ptr.dtype.element_ty
    heads = h0 + tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    half = R // 2
    first = (d < half)[None, :]
    in_rot = (d < R)[None, :]
    partner = tl.where(d < half, d + half, d - half)
    ok = (heads < H)[:, None] & (d < D)[None, :]
    row = x_ptr + t * stride_t + heads[:, None].to(tl.int64) * stride_h
    x = tl.load(row + d[None, :], mask=ok, other=0.0)
    xp = tl.load(row + partner[None, :], mask=ok & in_rot, other=0.0)
    if NORM >= 0:  # the head's factor from x; the partner channel normalised by the same one
        f = _rms_factor(x.to(tl.float32), inv_d, eps)
        x = _gain(x.to(tl.float32) * f, w_ptr, d[None, :], ok, NORM, dt).to(dt)
        xp = _gain(xp.to(tl.float32) * f, w_ptr, partner[None, :], ok & in_rot, NORM, dt).to(dt)
    if SCALED:
        x = (x.to(tl.float32) * scale).to(dt)
        xp = (xp.to(tl.float32) * scale).to(dt)
    rh = tl.where(first, -xp, xp)  # rotate_half(x): negation is exact in any dtype
    c = cos.to(dt).to(tl.float32)[None, :]
    s = sin.to(dt).to(tl.float32)[None, :]
    a = (x.to(tl.float32) * c).to(dt)
    b = (rh.to(tl.float32) * s).to(dt)
    y = (a.to(tl.float32) + b.to(tl.float32)).to(dt)
    y = tl.where(in_rot, y, x)
    out = out_ptr + (t * H + heads[:, None].to(tl.int64)) * D + d[None, :]
    tl.store(out, y, mask=ok)


@triton.jit
def _rope_kernel(pos_ptr, cos_ptr, sin_ptr, q_ptr, k_ptr, qo_ptr, ko_ptr, qw_ptr, kw_ptr,
                 stride_qt, stride_qh, stride_kt, stride_kh, stride_tab,
                 Hq, Hkv, D, R, q_blocks, q_scale, q_eps, k_eps, inv_d,
                 Q_NORM: tl.constexpr, K_NORM: tl.constexpr,
                 Q_SCALED: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
                 PDL: tl.constexpr = 0):
    """Grid (T, q_blocks + cdiv(Hkv, BLOCK_H)); see the module docstring."""
    pdl.start(PDL)   # kernels/pdl.py
    t = tl.program_id(0).to(tl.int64)
    blk = tl.program_id(1)
    pos = tl.load(pos_ptr + t).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    cos = tl.load(cos_ptr + pos * stride_tab + d, mask=d < R, other=0.0)
    sin = tl.load(sin_ptr + pos * stride_tab + d, mask=d < R, other=0.0)
    if blk < q_blocks:
        _rotate_heads(q_ptr, qo_ptr, cos, sin, q_scale, t, blk * BLOCK_H, Hq, stride_qt,
                      stride_qh, D, R, qw_ptr, q_eps, inv_d, Q_NORM, Q_SCALED, BLOCK_H, BLOCK_D)
    else:
        _rotate_heads(k_ptr, ko_ptr, cos, sin, q_scale, t, (blk - q_blocks) * BLOCK_H, Hkv,
                      stride_kt, stride_kh, D, R, kw_ptr, k_eps, inv_d, K_NORM, False, BLOCK_H,
                      BLOCK_D)


def _heads(x: torch.Tensor) -> torch.Tensor:
    """x [T, H, D] with a contiguous last dim (a copy only when it is not)."""
    return x if x.stride(-1) == 1 else x.contiguous()


def rope(positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cos_table: torch.Tensor,
         sin_table: torch.Tensor, q_scale: float | None = None, q_norm=None,
         k_norm=None) -> tuple[torch.Tensor, torch.Tensor]:
    """positions [T] (integer); q [T, Hq, D]; k [T, Hkv, D]; cos_table / sin_table fp32
    [max_positions, R] (R = rotary_dim <= D, even) -> (q_out, k_out): new contiguous tensors of
    q's / k's shape and dtype, equal to RotaryEmbedding.rotate(positions, q / k); with q_scale,
    q_out equals rotate(positions, q * q_scale). q_norm / k_norm: a per-head RMSNorm applied
    first, as (weight or None, eps, style) from kernels/norm.py's head_norm() or pre_norm(); its
    output is rounded to x's dtype as its own launch would round it (then the scale, then the
    rotation)."""
    if q.dim() != 3 or k.dim() != 3 or positions.dim() != 1:
        raise ValueError(f"expected positions [T], q [T, Hq, D], k [T, Hkv, D]; got "
                         f"{tuple(positions.shape)}, {tuple(q.shape)}, {tuple(k.shape)}")
    t, hq, dim = q.shape
    hkv = k.shape[1]
    if k.shape[0] != t or positions.shape[0] != t or k.shape[2] != dim:
        raise ValueError(f"positions {tuple(positions.shape)}, q {tuple(q.shape)} and "
                         f"k {tuple(k.shape)} do not match")
    if dim > MAX_HEAD_DIM:
        raise ValueError(f"head dim {dim} > {MAX_HEAD_DIM}")
    if cos_table.shape != sin_table.shape or cos_table.dim() != 2:
        raise ValueError("cos / sin tables must both be [max_positions, rotary_dim]")
    r = cos_table.shape[1]
    if r > dim or r % 2:
        raise ValueError(f"rotary dim {r} must be even and <= head dim {dim}")
    if cos_table.dtype != torch.float32 or sin_table.dtype != torch.float32:
        raise ValueError("cos / sin tables must be fp32")
    for name, spec, x in (("q_norm", q_norm, q), ("k_norm", k_norm, k)):
        if spec is not None:
            w, _, style = spec
            if (w is None) != (style == _NO_WEIGHT) or (w is not None and w.shape != (dim,)):
                raise ValueError(f"{name}: weight {None if w is None else tuple(w.shape)} does "
                                 f"not fit style {style} and head dim {dim}")
            if style == _PLAIN and w.dtype != x.dtype:
                raise ValueError(f"{name}: a plain norm's weight must have the heads' dtype "
                                 f"({w.dtype} vs {x.dtype})")
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    if t == 0 or (hq == 0 and hkv == 0) or dim == 0:
        return q_out, k_out
    q, k = _heads(q), _heads(k)
    cos_table, sin_table = cos_table.contiguous(), sin_table.contiguous()
    positions = positions.contiguous()
    block_d = triton.next_power_of_2(dim)
    block_h = max(1, min(triton.next_power_of_2(max(hq, hkv)), _TILE // block_d))
    q_blocks, k_blocks = triton.cdiv(hq, block_h), triton.cdiv(hkv, block_h)

    def norm_args(spec):  # (weight pointer, eps, style; -1: no norm)
        if spec is None:
            return cos_table, 0.0, -1
        w, eps, style = spec
        return (cos_table if w is None else w.contiguous()), float(eps), style

    qw, q_eps, q_style = norm_args(q_norm)
    kw, k_eps, k_style = norm_args(k_norm)
    _rope_kernel[(t, q_blocks + k_blocks)](
        positions, cos_table, sin_table, q, k, q_out, k_out, qw, kw,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), cos_table.stride(0),
        hq, hkv, dim, r, q_blocks, 1.0 if q_scale is None else float(q_scale), q_eps, k_eps,
        1.0 / dim, Q_NORM=q_style, K_NORM=k_style,
        Q_SCALED=q_scale is not None, BLOCK_H=block_h, BLOCK_D=block_d,
        num_warps=min(max(block_h * block_d // 512, 1), 8), enable_fp_fusion=False,
        **pdl.launch_args(q_out))
    return q_out, k_out
