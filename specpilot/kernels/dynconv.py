"""DFlash2's grouped dynamic causal conv (spec/drafter.py DynamicConv), one side per launch.

For rows r, block positions t, channels h, taps 0..K-1, group size gs and side s:
    out[r, t, h] = sum_{tap: t - tap >= 0} (base[s, tap, h] + delta[r, t, s, tap, h // gs])
                                           * y[r, t - tap, h]
i.e. DynamicConv.apply(y, DynamicConv.coefficients(x), s) with delta = kernel_projection(x)
viewed as [R, Bd, 2, K, G] (G = H / gs), read directly: no repeat_interleave over the group,
no materialised coefficient tensor. Taps never reach before the block start.

Numerics follow the torch code step by step, rounding where it rounds: with cd the dtype of
base + delta and od that of coeff * y (torch's type promotion),
    c = (base + delta).to(cd), p_tap = (c * y_shifted).to(od), out = (out + p_tap).to(od)
tap by tap from out = -0 (so the first step gives p_0 exactly, as torch's out = c_0 * y), with
y_shifted = 0 before the block start (torch's zero-filled shift) and taps >= Bd skipped (as
torch skips them). Every op is formed in fp32 and rounded, as torch's fp32-opmath kernels do;
products of two 16-bit values are exact in fp32, so 16-bit results equal torch's bit for bit,
and fp32 ones too since the launch forbids fma contraction (enable_fp_fusion=False). Checked
bit-equal for fp32 and fp16 in Triton's interpreter (whose fp32 -> bf16 cast truncates, so bf16
is only close there). Rounding once after an fp32 accumulation would be as good for a drafter,
whose numerics only change which drafts are proposed, but would no longer equal the torch path.

Layout. y [R, Bd, H], delta [R, Bd, 2, K, G], base [2, K, H], all made contiguous (no-ops for
the drafter's tensors); out [R, Bd, H] contiguous in od. Grid (R * Bd, cdiv(H, BLOCK_H)):
program (row, j) forms one block position's BLOCK_H channels, reading its K y rows (the
neighbouring programs' reads of the same rows hit the cache).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_BLOCK_H = 512  # channels per program, at most
_TL = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}


@triton.jit
def _dynconv_kernel(y_ptr, delta_ptr, base_ptr, out_ptr, Bd, H, G, side,
                    K: tl.constexpr, GS: tl.constexpr, C_DTYPE: tl.constexpr,
                    BLOCK_H: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # r * Bd + t
    t = row % Bd
    offs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    mask = offs < H
    o_dt = out_ptr.dtype.element_ty
    d_ptrs = delta_ptr + (row * 2 + side) * K * G + offs // GS  # delta[r, t, side, 0, group]
    b_ptrs = base_ptr + side * K * H + offs
    acc = tl.full([BLOCK_H], -0.0, dtype=tl.float32)  # -0 + p == p, signed zeros included
    for tap in tl.static_range(K):
        c = (tl.load(b_ptrs + tap * H, mask=mask, other=0.0).to(tl.float32)
             + tl.load(d_ptrs + tap * G, mask=mask, other=0.0).to(tl.float32)).to(C_DTYPE)
        in_block = tl.where(t >= tap, mask, False)  # (mask & scalar fails in the interpreter)
        y = tl.load(y_ptr + (row - tap) * H + offs, mask=in_block, other=0.0)
        p = (c.to(tl.float32) * y.to(tl.float32)).to(o_dt)
        acc = tl.where(Bd > tap, (acc + p.to(tl.float32)).to(o_dt).to(tl.float32), acc)
    tl.store(out_ptr + row * H + offs, acc.to(o_dt), mask=mask)


def dynamic_conv(y: torch.Tensor, delta: torch.Tensor, base: torch.Tensor, side: int,
                 group_size: int, block_h: int | None = None) -> torch.Tensor:
    """Side `side` of the dynamic conv of y [R, Bd, H] with coefficients base [2, K, H] +
    delta [R, Bd, 2, K, H // group_size] broadcast over each group -> out [R, Bd, H] (see the
    module docstring). block_h: channels per program (a power of 2; default min(512, H))."""
    r, bd, h = y.shape
    k = base.shape[1] if base.dim() == 3 else 0
    if not k or h % group_size or tuple(base.shape) != (2, k, h) \
            or tuple(delta.shape) != (r, bd, 2, k, h // group_size):
        raise ValueError(f"dynamic_conv: y {tuple(y.shape)}, delta {tuple(delta.shape)}, base "
                         f"{tuple(base.shape)} and group size {group_size} do not fit")
    c_dtype = torch.promote_types(base.dtype, delta.dtype)
    out_dtype = torch.promote_types(c_dtype, y.dtype)
    if out_dtype not in _TL:
        raise ValueError(f"dynamic_conv: unsupported dtype {out_dtype}")
    out = torch.empty((r, bd, h), dtype=out_dtype, device=y.device)
    if out.numel() == 0:
        return out
    block_h = block_h or min(_BLOCK_H, triton.next_power_of_2(h))
    _dynconv_kernel[(r * bd, triton.cdiv(h, block_h))](
        y.contiguous(), delta.contiguous(), base.contiguous(), out, bd, h, h // group_size, side,
        K=k, GS=group_size, C_DTYPE=_TL[c_dtype], BLOCK_H=block_h,
        num_warps=min(max(block_h // 128, 1), 4), enable_fp_fusion=False)
    return out
