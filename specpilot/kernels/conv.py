"""Gated DeltaNet's short causal conv (depthwise, kernel K, then silu) on the uniform path
(decode / verify: N requests of T rows each) in Triton, reading and writing the engine's conv
window pool in place.

Per request b and channel c, with the window w_0 .. w_{K-2} (the last K-1 inputs before the
request's rows; zeros when fresh[b] != 0) and the inputs x_0 .. x_{T-1}:
    seq = [w_0 .. w_{K-2}, x_0 .. x_{T-1}]          (window rounded to x's dtype)
    y_t = silu(round(sum_j weight[c, j] * seq[t + j]))   (cross-correlation, as F.conv1d)
the conv sum is formed in fp32, rounded to x's dtype (conv1d's output dtype), then silu in fp32
(g / (1 + exp(-g)), IEEE division) and rounded again. With WRITE_STATE the last K-1 entries of
seq (as fp32) go back to conv_state[rows[b]]. Only the summation order differs from torch's
conv1d: fp32 agrees to a few ulp, 16-bit outputs to within an ulp or two.

Layout. x [N*T, C] (row-strided; the channel dim contiguous), weight [C, K], conv_state
[R, C, K-1] fp32 contiguous (one layer's view), y [N*T, C] contiguous in x's dtype.
With `stash` (VERIFY) the kernel also copies each row's inputs x to stash_x and its outputs
past the first KD channels (Gated DeltaNet's k | v) to stash_kv, so the commit can replay them
without separate copy launches.
Grid (N, cdiv(C, BLOCK_C)); one program holds its channels' K inputs [BLOCK_C, KP]
(KP = next_power_of_2(K)) in registers and walks the request's T rows, shifting the window left
by one column per row.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_BLOCK_C = 128  # channels per program


@triton.jit
def _causal_conv_kernel(x_ptr, w_ptr, state_ptr, y_ptr, rows_ptr, fresh_ptr,
                        sx_ptr, skv_ptr, stride_x, stride_w, stride_sr, stride_sx, stride_skv,
                        T, C, KD,
                        K: tl.constexpr, KP: tl.constexpr, BLOCK_C: tl.constexpr,
                        WRITE_STATE: tl.constexpr, STASH: tl.constexpr):
    b = tl.program_id(0)
    cb = tl.program_id(1)
    row = tl.load(rows_ptr + b).to(tl.int64)
    fresh = tl.load(fresh_ptr + b)

    offs_c = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    cols = tl.arange(0, KP)
    # s[:, j] for 1 <= j <= K-1 holds window entry j-1; column 0 is shifted out on the first row
    s_ptrs = state_ptr + row * stride_sr + offs_c[:, None] * (K - 1) + (cols[None, :] - 1)
    s_mask = mask_c[:, None] & (cols[None, :] >= 1) & (cols[None, :] < K)
    s = tl.load(s_ptrs, mask=s_mask, other=0.0)
    s = tl.where(fresh == 0, s, 0.0)  # a fresh request starts from zeros, whatever its row holds
    s = s.to(x_ptr.dtype.element_ty).to(tl.float32)  # seq is built with window.to(x.dtype)
    w = tl.load(w_ptr + offs_c[:, None] * stride_w + cols[None, :],
                mask=mask_c[:, None] & (cols[None, :] < K), other=0.0).to(tl.float32)
    # shift[:, j, i]: column j of the shifted window takes column i = j + 1
    shift = (cols[:, None] + 1) == cols[None, :]
    last = cols[None, :] == K - 1

    for t in range(T):
        r = (b * T + t).to(tl.int64)
        xt = tl.load(x_ptr + r * stride_x + offs_c, mask=mask_c, other=0.0)
        if STASH:
            tl.store(sx_ptr + r * stride_sx + offs_c, xt.to(sx_ptr.dtype.element_ty), mask=mask_c)
        xt = xt.to(tl.float32)
        s = tl.sum(tl.where(shift[None, :, :], s[:, None, :], 0.0), axis=2)
        s = tl.where(last, xt[:, None], s)
        g = tl.sum(s * w, axis=1).to(y_ptr.dtype.element_ty).to(tl.float32)
        y = tl.div_rn(g, 1.0 + tl.exp(-g))
        y = y.to(y_ptr.dtype.element_ty)
        tl.store(y_ptr + r * C + offs_c, y, mask=mask_c)
        if STASH:
            tl.store(skv_ptr + r * stride_skv + (offs_c - KD), y.to(skv_ptr.dtype.element_ty),
                     mask=mask_c & (offs_c >= KD))
    if WRITE_STATE:
        tl.store(s_ptrs, s, mask=s_mask)


def causal_conv(x: torch.Tensor, weight: torch.Tensor, conv_state: torch.Tensor,
                rows: torch.Tensor, fresh: torch.Tensor, rows_per_request: int,
                write_state: bool,
                stash: tuple[torch.Tensor, torch.Tensor, int] | None = None) -> torch.Tensor:
    """silu(causal depthwise conv) of len(rows) requests of rows_per_request rows each -> y
    [N*T, C] contiguous in x's dtype (see the module docstring). rows, fresh: int32 [N] device
    tensors; with write_state each request's last K-1 inputs go to conv_state[rows[b]].
    stash (stash_x [N*T, C], stash_kv [N*T, C - KD], KD): x and y[:, KD:] are copied there too
    (row-strided, channel dim contiguous, any float dtype)."""
    c, k = weight.shape
    n, t = rows.shape[0], rows_per_request
    if x.dim() != 2 or x.shape[1] != c or x.shape[0] != n * t:
        raise ValueError(f"causal_conv: x {tuple(x.shape)} is not [{n} * {t}, {c}]")
    if x.stride(-1) != 1 or weight.stride(-1) != 1:
        raise ValueError("causal_conv: the channel dim of x and the taps of weight must be "
                         "contiguous")
    if (conv_state.dtype != torch.float32 or not conv_state.is_contiguous()
            or tuple(conv_state.shape[1:]) != (c, k - 1)):
        raise ValueError(f"causal_conv: conv_state must be contiguous fp32 [R, {c}, {k - 1}]")
    if stash is not None:
        sx, skv, kd = stash
        if (tuple(sx.shape) != tuple(x.shape) or tuple(skv.shape) != (n * t, c - kd)
                or sx.stride(-1) != 1 or skv.stride(-1) != 1):
            raise ValueError(f"causal_conv: stash must be [{n * t}, {c}] and [{n * t}, "
                             f"{c - kd}] with a contiguous channel dim")
    else:
        sx = skv = x
        kd = 0
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if n == 0 or t == 0:
        return y
    grid = (n, triton.cdiv(c, _BLOCK_C))
    _causal_conv_kernel[grid](
        x, weight, conv_state, y, rows, fresh, sx, skv,
        x.stride(0), weight.stride(0), conv_state.stride(0), sx.stride(0), skv.stride(0),
        t, c, kd, K=k, KP=triton.next_power_of_2(k), BLOCK_C=_BLOCK_C,
        WRITE_STATE=write_state, STASH=stash is not None, num_warps=4)
    return y
