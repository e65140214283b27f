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
Grid (N, cdiv(C, BLOCK_C)). A program takes its request's rows in chunks of TC (a power of two,
up to 16) and computes every row of a chunk at once: the [TC, BLOCK_C, KP] tile of conv inputs
seq[t + j] is loaded straight from the window pool (t + j < K - 1) or from x, so no row waits for
the one before it (the window is not carried through the rows). A VERIFY step's 8-16 rows thus
cost about one row's latency; decode (T = 1) is one chunk of one row.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specpilot.kernels import pdl

_BLOCK_C = 128  # channels per program at one row per chunk; fewer as the chunk grows
_MAX_TC = 16  # rows per chunk


def _tile(t: int) -> tuple[int, int]:
    """(TC, BLOCK_C) for requests of t rows: BLOCK_C = 128 / TC, at least 32, so a chunk's tile
    holds at most 512 values per tap."""
    tc = min(triton.next_power_of_2(max(t, 1)), _MAX_TC)
    return tc, max(_BLOCK_C // tc, 32)


@triton.jit
def _causal_conv_kernel(x_ptr, w_ptr, state_ptr, y_ptr, rows_ptr, fresh_ptr,
                        sx_ptr, skv_ptr, stride_x, stride_w, stride_sr, stride_sx, stride_skv,
                        T, C, KD,
                        K: tl.constexpr, KP: tl.constexpr, BLOCK_C: tl.constexpr,
                        TC: tl.constexpr, WRITE_STATE: tl.constexpr, STASH: tl.constexpr,
                        PDL: tl.constexpr = 0):
    pdl.start(PDL)   # kernels/pdl.py
    b = tl.program_id(0)
    cb = tl.program_id(1)
    row = tl.load(rows_ptr + b).to(tl.int64)
    live = tl.load(fresh_ptr + b) == 0  # a fresh request starts from zeros, whatever its row holds
    base = (b * T).to(tl.int64)

    offs_c = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    mask_c = offs_c < C
    cols = tl.arange(0, KP)
    w = tl.load(w_ptr + offs_c[:, None] * stride_w + cols[None, :],
                mask=mask_c[:, None] & (cols[None, :] < K), other=0.0).to(tl.float32)
    c3 = offs_c[None, :, None]
    j3 = cols[None, None, :]
    m3 = mask_c[None, :, None] & (j3 < K)
    s_row = state_ptr + row * stride_sr + c3 * (K - 1)
    for t0 in range(0, T, TC):
        tt = t0 + tl.arange(0, TC)
        t3 = tt[:, None, None]
        # seq[t + j]: window entry t + j while t + j < K - 1, else x row t + j - (K - 1)
        q = t3 + j3
        in_win = q < K - 1
        win = tl.load(s_row + q, mask=m3 & in_win & (t3 < T), other=0.0)
        win = tl.where(live, win, 0.0)
        win = win.to(x_ptr.dtype.element_ty).to(tl.float32)  # seq is built with window.to(x.dtype)
        xs = tl.load(x_ptr + (base + q - (K - 1)) * stride_x + c3,
                     mask=m3 & (q >= K - 1) & (t3 < T), other=0.0).to(tl.float32)
        seq = tl.where(in_win, win, xs)
        g = tl.sum(seq * w[None, :, :], axis=2).to(y_ptr.dtype.element_ty).to(tl.float32)
        y = tl.div_rn(g, 1.0 + tl.exp(-g)).to(y_ptr.dtype.element_ty)  # [TC, BLOCK_C]
        r = base + tt[:, None]
        ok = (tt[:, None] < T) & mask_c[None, :]
        tl.store(y_ptr + r * C + offs_c[None, :], y, mask=ok)
        if STASH:
            xt = tl.load(x_ptr + r * stride_x + offs_c[None, :], mask=ok, other=0.0)
            tl.store(sx_ptr + r * stride_sx + offs_c[None, :], xt.to(sx_ptr.dtype.element_ty),
                     mask=ok)
            tl.store(skv_ptr + r * stride_skv + (offs_c[None, :] - KD),
                     y.to(skv_ptr.dtype.element_ty), mask=ok & (offs_c[None, :] >= KD))
    if WRITE_STATE:
        # the new window: seq[T + i] for i < K - 1 (old window entries while T + i < K - 1)
        q2 = T + cols[None, :]
        m2 = mask_c[:, None] & (cols[None, :] < K - 1)
        s_ptrs = state_ptr + row * stride_sr + offs_c[:, None] * (K - 1) + cols[None, :]
        old = tl.load(state_ptr + row * stride_sr + offs_c[:, None] * (K - 1) + q2,
                      mask=m2 & (q2 < K - 1), other=0.0)
        old = tl.where(live, old, 0.0).to(x_ptr.dtype.element_ty).to(tl.float32)
        new = tl.load(x_ptr + (base + q2 - (K - 1)) * stride_x + offs_c[:, None],
                      mask=m2 & (q2 >= K - 1), other=0.0).to(tl.float32)
        tl.debug_barrier()  # every read of the old window is done before it is overwritten
        tl.store(s_ptrs, tl.where(q2 < K - 1, old, new), mask=m2)


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
    tc, block_c = _tile(t)
    grid = (n, triton.cdiv(c, block_c))
    _causal_conv_kernel[grid](
        x, weight, conv_state, y, rows, fresh, sx, skv,
        x.stride(0), weight.stride(0), conv_state.stride(0), sx.stride(0), skv.stride(0),
        t, c, kd, K=k, KP=triton.next_power_of_2(k), BLOCK_C=block_c, TC=tc,
        WRITE_STATE=write_state, STASH=stash is not None, num_warps=4,
        **pdl.launch_args(y))
    return y


@triton.jit
def _commit_windows_kernel(conv_ptr, sx_ptr, rows_ptr, fresh_ptr, keep_ptr,
                           stride_cl, stride_cr, stride_sl, stride_sx, T, C,
                           K: tl.constexpr, KP: tl.constexpr, BLOCK_C: tl.constexpr,
                           PDL: tl.constexpr = 0):
    """Grid (L, N, cdiv(C, BLOCK_C)): window[i] = seq[keep + i] for i < K - 1, seq = the old
    window (zeros when fresh) followed by the request's T stashed inputs."""
    pdl.start(PDL)   # kernels/pdl.py
    layer = tl.program_id(0).to(tl.int64)
    b = tl.program_id(1)
    cb = tl.program_id(2)
    row = tl.load(rows_ptr + b).to(tl.int64)
    live = tl.load(fresh_ptr + b) == 0
    keep = tl.load(keep_ptr + b)
    offs_c = cb * BLOCK_C + tl.arange(0, BLOCK_C)
    cols = tl.arange(0, KP)
    q = keep + cols[None, :]
    m = (offs_c < C)[:, None] & (cols[None, :] < K - 1)
    win = conv_ptr + layer * stride_cl + row * stride_cr + offs_c[:, None] * (K - 1)
    old = tl.load(win + q, mask=m & (q < K - 1), other=0.0)
    old = tl.where(live, old, 0.0)
    src = (b * T + q - (K - 1)).to(tl.int64)
    new = tl.load(sx_ptr + layer * stride_sl + src * stride_sx + offs_c[:, None],
                  mask=m & (q >= K - 1), other=0.0).to(tl.float32)
    tl.debug_barrier()  # every read of the old window is done before it is overwritten
    tl.store(win + cols[None, :], tl.where(q < K - 1, old, new), mask=m)


def commit_windows(conv: torch.Tensor, stash_x: torch.Tensor, rows: torch.Tensor,
                   fresh: torch.Tensor, keep: torch.Tensor, rows_per_request: int) -> None:
    """A VERIFY commit's conv windows, every layer in one launch: request b's window (row rows[b]
    of conv [L, R, C, K-1] fp32) becomes the last K-1 conv inputs of its first keep[b] rows,
    taken from the old window and stash_x [L, >= N*T, C] (the rows' inputs, as the conv kernel
    stashed them). rows, fresh, keep: int32 [N] device tensors, 1 <= keep[b] <= T. Pure copies:
    equal, bit for bit, to gathering from the concatenation [window, inputs]."""
    n_layers, _, c, k1 = conv.shape
    n, t = rows.shape[0], rows_per_request
    if not conv.is_contiguous() or conv.dtype != torch.float32:
        raise ValueError("commit_windows: conv must be a contiguous fp32 [L, R, C, K-1] pool")
    if (stash_x.dim() != 3 or stash_x.shape[0] != n_layers or stash_x.shape[2] != c
            or stash_x.shape[1] < n * t or stash_x.stride(-1) != 1):
        raise ValueError(f"commit_windows: stash_x {tuple(stash_x.shape)} is not "
                         f"[{n_layers}, >= {n * t}, {c}] with a contiguous channel dim")
    if n == 0 or t == 0:
        return
    grid = (n_layers, n, triton.cdiv(c, _BLOCK_C))
    _commit_windows_kernel[grid](
        conv, stash_x, rows, fresh, keep, conv.stride(0), conv.stride(1), stash_x.stride(0),
        stash_x.stride(1), t, c, K=k1 + 1, KP=triton.next_power_of_2(k1 + 1),
        BLOCK_C=_BLOCK_C, num_warps=4, **pdl.launch_args(conv))
