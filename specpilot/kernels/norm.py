"""Element-wise kernels of a decoder step in Triton: RMSNorm (plain, zero-centred, gated), with an
optional fused residual add, and the MLP's silu(gate) * up.

Numerics follow the torch modules of layers/norm.py step by step, rounding where they round:
the row is normalised in fp32 (x * rsqrt(mean(x^2) + eps)), then
  plain:         weight * normed.to(x.dtype)                        (output: promote(w, x) dtype)
  zero-centred:  (normed * (1 + weight.float())).to(x.dtype)
  gated:         ((weight * normed.to(x.dtype)) * silu(gate.float())).to(x.dtype)
  fp32 weight:   (normed * weight.float()).to(x.dtype), or normed.to(x.dtype) without a weight
                 (Muse-Glimmer's MuseRMSNorm, rms_norm_fp32_weight; it takes pow(m, -0.5)
                 where this takes rsqrt(m): an ulp at most apart in fp32)
with residual: h = (x + residual) rounded to x's dtype is what gets normalised, and returned too.
with residual and `pre` (a zero-centred, fp32-weight or weightless norm of its own): the residual
row is first normalised by that norm, rounded to x's dtype as its own launch would round it, and
then added (a sandwich model's post-norm folded into the pre-norm after it: one launch for
post-norm, add and pre-norm).
Only the sum of squares differs from torch (its reduction order), so fp32 results agree to a few
ulp and 16-bit ones to within one ulp, equal in nearly every element.

One program normalises one row (BLOCK = next_power_of_2(D), D up to 8192). Rows are addressed as
(outer, inner) pairs with their own strides, so views such as the q / k heads [T, H, D] split
from a fused qkv GEMM are read in place; outputs are new contiguous tensors. silu_mul reads gate
and up through row strides (halves of one fused gate_up output) and tiles each row.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specpilot.kernels import pdl

MAX_NORM_DIM = 8192  # one row is held in registers by one program
_PLAIN, _ZERO_CENTRED, _GATED, _FP32_WEIGHT, _NO_WEIGHT = 0, 1, 2, 3, 4
_SILU_BLOCK = 1024  # elements of a row one silu_mul program handles

_TL_DTYPE = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}


@triton.jit
def _silu(g):
    """silu in fp32 as torch computes it: g / (1 + exp(-g)), IEEE division."""
    return tl.div_rn(g, 1.0 + tl.exp(-g))


@triton.jit
def _rms_factor(x32, inv_d, eps):
    """rsqrt(mean(x^2) + eps) over the last axis of x32 (a row [D], or heads [H, D]: one
    factor per head), kept as a size-1 axis so it broadcasts over the row."""
    return tl.rsqrt(tl.sum(x32 * x32, axis=-1, keep_dims=True) * inv_d + eps)


@triton.jit
def _gain(normed, w_ptr, offs, ok, STYLE: tl.constexpr, DT: tl.constexpr):
    """The gain of STYLE on normed (fp32) -> fp32: 0 plain, w * normed.to(DT) (for a weight of
    DT's dtype); 1 zero-centred (1 + w); 3 fp32 weight w; 4 none."""
    if STYLE == 4:
        return normed
    w = tl.load(w_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    if STYLE == 0:
        return normed.to(DT).to(tl.float32) * w
    if STYLE == 1:
        return normed * (1.0 + w)
    return normed * w


@triton.jit
def _fp32_gain_norm(x32, w_ptr, offs, ok, inv_d, eps, STYLE: tl.constexpr):
    """x32 normalised, then the fp32 gain of STYLE 1 (1 + w), 3 (w) or 4 (none); fp32."""
    return _gain(x32 * _rms_factor(x32, inv_d, eps), w_ptr, offs, ok, STYLE, tl.float32)


@triton.jit
def _rms_norm_kernel(x_ptr, res_ptr, gate_ptr, w_ptr, pre_w_ptr, out_ptr, h_ptr,
                     stride_xo, stride_xi, stride_ro, stride_ri, stride_go, stride_gi,
                     inner, D, inv_d, eps, pre_eps,
                     STYLE: tl.constexpr, HAS_RES: tl.constexpr, MID: tl.constexpr,
                     PRE: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr = 0):
    """Grid (rows,). Row r sits at (r // inner) * stride_*o + (r % inner) * stride_*i; outputs
    (out, h) are contiguous [rows, D]. MID: the dtype of weight * normed (plain / gated).
    PRE (with HAS_RES): the residual's own norm style (1, 3 or 4; -1: none), weight pre_w.
    PDL (kernels/pdl.py, pdl.start): waits for the previous kernel before anything else."""
    pdl.start(PDL)
    row = tl.program_id(0)
    o = (row // inner).to(tl.int64)
    i = (row % inner).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    ok = offs < D
    x = tl.load(x_ptr + o * stride_xo + i * stride_xi + offs, mask=ok, other=0.0)
    if HAS_RES:
        r = tl.load(res_ptr + o * stride_ro + i * stride_ri + offs, mask=ok, other=0.0)
        if PRE >= 0:  # the residual's own norm, rounded to x's dtype as its launch would
            r = _fp32_gain_norm(r.to(tl.float32), pre_w_ptr, offs, ok, inv_d, pre_eps,
                                PRE).to(x_ptr.dtype.element_ty)
        x = (x.to(tl.float32) + r.to(tl.float32)).to(x_ptr.dtype.element_ty)
        tl.store(h_ptr + row.to(tl.int64) * D + offs, x, mask=ok)
    x32 = x.to(tl.float32)
    if STYLE == 1 or STYLE == 3 or STYLE == 4:
        y = _fp32_gain_norm(x32, w_ptr, offs, ok, inv_d, eps, STYLE)
    else:  # plain / gated: the gain applied to the normed row rounded to x's dtype
        normed = x32 * tl.rsqrt(tl.sum(x32 * x32, axis=0) * inv_d + eps)
        w = tl.load(w_ptr + offs, mask=ok, other=0.0).to(tl.float32)
        y = (normed.to(x_ptr.dtype.element_ty).to(tl.float32) * w).to(MID).to(tl.float32)
        if STYLE == 2:
            g = tl.load(gate_ptr + o * stride_go + i * stride_gi + offs, mask=ok, other=0.0)
            y = y * _silu(g.to(tl.float32))
    tl.store(out_ptr + row.to(tl.int64) * D + offs, y.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _silu_mul_kernel(gate_ptr, up_ptr, out_ptr, stride_g, stride_u, N, BLOCK: tl.constexpr,
                     PDL: tl.constexpr = 0):
    """Grid (rows, cdiv(N, BLOCK)): out[r] = silu(gate[r]) * up[r], each rounded to out's dtype.
    PDL: as in _rms_norm_kernel."""
    pdl.start(PDL)
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    g = tl.load(gate_ptr + row * stride_g + offs, mask=ok, other=0.0)
    u = tl.load(up_ptr + row * stride_u + offs, mask=ok, other=0.0)
    s = _silu(g.to(tl.float32)).to(out_ptr.dtype.element_ty)
    y = s.to(tl.float32) * u.to(tl.float32)
    tl.store(out_ptr + row * N + offs, y.to(out_ptr.dtype.element_ty), mask=ok)


def _rows(t: torch.Tensor, dim: int) -> tuple[torch.Tensor, int, int]:
    """t [..., dim] as an (outer, inner, dim) view (a copy only if no such view exists) with its
    outer and inner strides; inner is t's second-to-last size (1 for a 1-D t)."""
    inner = t.shape[-2] if t.dim() > 1 else 1
    t3 = t.reshape(-1, inner, dim)
    if t3.stride(-1) != 1:
        t3 = t3.contiguous()
    return t3, t3.stride(0), t3.stride(1)


def pre_norm(weight: torch.Tensor | None, eps: float, zero_centred: bool = False):
    """The `pre` argument of rms_norm / rms_norm_fp32_weight: a norm applied to the residual
    before the add. zero_centred: ZeroCenteredRMSNorm numerics, (normed * (1 + w)).to(dtype);
    else MuseRMSNorm's, (normed * w.float()).to(dtype), or normed.to(dtype) for weight None."""
    if zero_centred and weight is None:
        raise ValueError("a zero-centred norm needs its weight")
    style = _ZERO_CENTRED if zero_centred else (_NO_WEIGHT if weight is None else _FP32_WEIGHT)
    return (weight, float(eps), style)


def head_norm(weight: torch.Tensor, eps: float):
    """A plain RMSNorm (weight * normed.to(dtype)) as kernels/rope.py's q_norm / k_norm:
    (weight, eps, style). The other styles are pre_norm()'s specs."""
    if weight is None:
        raise ValueError("a plain RMSNorm needs its weight")
    return (weight, float(eps), _PLAIN)


def _norm(x, weight, eps, style, residual=None, gate=None, pre=None):
    dim = x.shape[-1]
    if pre is not None:
        if residual is None:
            raise ValueError("pre normalises the residual: give a residual")
        if pre[0] is not None and pre[0].shape != (dim,):
            raise ValueError(f"pre weight {tuple(pre[0].shape)} does not match dim {dim}")
    if dim > MAX_NORM_DIM:
        raise ValueError(f"norm dim {dim} > {MAX_NORM_DIM}")
    if style != _NO_WEIGHT and weight.shape != (dim,):
        raise ValueError(f"weight {tuple(weight.shape)} does not match dim {dim}")
    for name, t in (("residual", residual), ("gate", gate)):
        if t is not None and t.shape != x.shape:
            raise ValueError(f"{name} {tuple(t.shape)} does not match x {tuple(x.shape)}")
    if residual is not None and residual.dtype != x.dtype:
        raise ValueError("residual must have x's dtype")
    if style in (_ZERO_CENTRED, _FP32_WEIGHT, _NO_WEIGHT):
        mid = x.dtype
    else:
        mid = torch.promote_types(weight.dtype, x.dtype)
    out = torch.empty(x.shape, dtype=x.dtype if style == _GATED else mid, device=x.device)
    h = torch.empty_like(x, memory_format=torch.contiguous_format) if residual is not None else out
    if x.numel() == 0:
        return out, h
    x3, sxo, sxi = _rows(x, dim)
    r3, sro, sri = _rows(residual, dim) if residual is not None else (x3, 0, 0)
    g3, sgo, sgi = _rows(gate, dim) if gate is not None else (x3, 0, 0)
    w = x3 if weight is None else weight.contiguous()  # _NO_WEIGHT: a placeholder, not read
    pw = x3 if pre is None or pre[0] is None else pre[0].contiguous()
    block = triton.next_power_of_2(dim)
    _rms_norm_kernel[(x3.shape[0] * x3.shape[1],)](
        x3, r3, g3, w, pw, out, h, sxo, sxi, sro, sri, sgo, sgi,
        x3.shape[1], dim, 1.0 / dim, eps, pre[1] if pre is not None else 0.0,
        STYLE=style, HAS_RES=residual is not None, MID=_TL_DTYPE[mid],
        PRE=pre[2] if pre is not None else -1, BLOCK=block,
        num_warps=min(max(block // 256, 1), 16), **pdl.launch_args(x))
    return out, h


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, zero_centred: bool = False,
             residual: torch.Tensor | None = None, pre=None):
    """RMSNorm of x [..., D] (RMSNorm or, zero_centred, ZeroCenteredRMSNorm numerics) -> a new
    tensor of x's shape. With residual (x's shape and dtype): h = x + residual, returns
    (rms_norm(h), h), the add and the norm in one pass; with pre (pre_norm(...)) too, h = x +
    pre's norm of residual."""
    out, h = _norm(x, weight, eps, _ZERO_CENTRED if zero_centred else _PLAIN, residual=residual,
                   pre=pre)
    return out if residual is None else (out, h)


def gated_rms_norm(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor,
                   eps: float) -> torch.Tensor:
    """GatedRMSNorm: (weight * rms_norm(x).to(x.dtype)) * silu(gate.float()), in x's dtype."""
    return _norm(x, weight, eps, _GATED, gate=gate)[0]


def rms_norm_fp32_weight(x: torch.Tensor, weight: torch.Tensor | None, eps: float,
                         residual: torch.Tensor | None = None, pre=None):
    """RMSNorm with an optional weight applied in fp32 (Muse-Glimmer's MuseRMSNorm):
    (normed * weight.float()).to(x.dtype), or normed.to(x.dtype) for weight None; x [..., D]
    (rows may be strided views) -> a new tensor of x's shape and dtype. With residual (and
    pre): as rms_norm, (norm(h), h) for h = x + residual (or x + pre's norm of residual)."""
    out, h = _norm(x, weight, eps, _NO_WEIGHT if weight is None else _FP32_WEIGHT,
                   residual=residual, pre=pre)
    return out if residual is None else (out, h)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up for gate, up [..., N] of one dtype, as torch rounds it (silu in fp32, then
    rounded, then the product rounded). Rows may be strided views (halves of a fused GEMM's
    output); the last dim is read contiguously. Returns a new contiguous tensor."""
    if gate.shape != up.shape or gate.dtype != up.dtype:
        raise ValueError("gate and up need one shape and dtype")
    n = gate.shape[-1]
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    if out.numel() == 0:
        return out
    g2, u2 = gate.reshape(-1, n), up.reshape(-1, n)
    g2 = g2 if g2.stride(-1) == 1 else g2.contiguous()
    u2 = u2 if u2.stride(-1) == 1 else u2.contiguous()
    block = min(_SILU_BLOCK, triton.next_power_of_2(n))
    _silu_mul_kernel[(g2.shape[0], triton.cdiv(n, block))](
        g2, u2, out, g2.stride(0), u2.stride(0), n, BLOCK=block, num_warps=4,
        **pdl.launch_args(out))
    return out
