"""Gated delta rule (Gated DeltaNet's recurrence) in Triton, reading and writing the engine's
state pool in place: decode, chain verify, extend, and the verify commit over all layers at once.

Per request b and value head h the state S [Dk, Dv] (fp32) runs over the request's rows t:
    S <- S * exp(g_t);  S <- S + k_t (beta_t (v_t - k_t S));  o_t = q_t S
with q_t, k_t L2-normalised in the kernel (x * rsqrt(sum x^2 + eps), as layers/gdn.l2norm) and q_t
scaled by `scale`. Value head h reads key head h // (Hv / Hk) (GQA, no repeated copy of q/k).

Layout. q, k [.., T, Hk*Dk], v [.., T, Hv*Dv] (row-strided views: they are column slices of the
conv output), g, beta [.., T, Hv] fp32 (or, with `gate`, the raw projections the gates come
from, computed in the kernel), out [T, Hv, Dv] fp32 or `out_dtype` (the fp32 sum rounded once).
state [L, R, Hv, Dk, Dv] (a layer's view [R, ...] is L = 1). Request b owns rows starts[b] ..
starts[b] + lens[b] - 1, starts from state row rows[b] (or from zeros when fresh[b] != 0) and,
with WRITE_STATE, stores its final state back there. With several layers (the commit) the leading dimension of k, v, g, beta and state is
the layer; program axis 1 is layer * Hv + h. With `stash_gates` (VERIFY) the programs of the
first Dv tile also copy each row's g and beta inputs to the stash, so the commit can replay them
without separate copy launches.

One program holds a [Dk, BV] slice of one state in registers for all of the request's rows, so a
verify step reads each state once and writes nothing (WRITE_STATE off), and the commit replays the
accepted rows from the same committed state (engine/state_pool.py). Lengths are read on device:
the launch grid depends only on (requests, layers x heads, Dv / BV), which is what CUDA graphs
need.

DECODE of a whole layer (conv_gated_delta_decode): the short causal conv of kernels/conv.py for
the row's q, k and v channels, the gates and the recurrence in one launch, with the same numbers
as the two launches; the windows of the q / k channels, which every program of a key head reads,
are written by the last of those programs to finish reading (an atomic count).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specpilot.kernels import pdl


@triton.jit
def _l2norm(x, eps):
    """x * rsqrt(sum x^2 + eps) over a head's fp32 vector, as layers/gdn.l2norm."""
    return x * (1.0 / tl.sqrt(tl.sum(x * x, axis=0) + eps))


@triton.jit
def _gates(a, b, decay_rate, dt_bias):
    """Gated DeltaNet's gates from the raw projections a, b (one head, one row):
    g = -decay_rate softplus(a + dt_bias) (decay_rate = exp(A_log)); beta = sigmoid(b) in fp32,
    rounded to b's dtype like torch's."""
    x = a.to(tl.float32) + dt_bias
    g = -decay_rate * tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))  # softplus
    beta = (1.0 / (1.0 + tl.exp(-b.to(tl.float32)))).to(b.dtype).to(tl.float32)
    return g, beta


@triton.jit
def _delta_update(s, kt, vt, gt, bt):
    """One row of the rule on a [Dk, BV] state slice: S <- S exp(g); S <- S + k (beta (v - k S))."""
    s = s * tl.exp(gt)
    kv = tl.sum(s * kt[:, None], axis=0)
    return s + kt[:, None] * ((vt - kv) * bt)[None, :]


@triton.jit
def _gated_delta_kernel(
        q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, out_ptr, state_ptr,
        rows_ptr, fresh_ptr, starts_ptr, lens_ptr, a_log_ptr, dt_bias_ptr, sg_ptr, sb_ptr,
        stride_sgt, stride_qt, stride_kl, stride_kt, stride_vl, stride_vt, stride_gl, stride_gt,
        stride_sl, stride_sr, scale, eps,
        HK: tl.constexpr, HV: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr,
        BK: tl.constexpr, BV: tl.constexpr,
        WRITE_OUT: tl.constexpr, WRITE_STATE: tl.constexpr, GATE: tl.constexpr,
        STASH: tl.constexpr, PDL: tl.constexpr = 0):
    pdl.start(PDL)   # kernels/pdl.py
    b = tl.program_id(0)
    lh = tl.program_id(1)
    vb = tl.program_id(2)
    layer = (lh // HV).to(tl.int64)
    h = lh % HV
    hk = h // (HV // HK)
    row = tl.load(rows_ptr + b).to(tl.int64)
    fresh = tl.load(fresh_ptr + b)
    start = tl.load(starts_ptr + b).to(tl.int64)
    n = tl.load(lens_ptr + b)

    offs_k = tl.arange(0, BK)
    offs_v = vb * BV + tl.arange(0, BV)
    mask_k = offs_k < DK
    mask_v = offs_v < DV
    s_ptrs = (state_ptr + layer * stride_sl + row * stride_sr + h * DK * DV
              + offs_k[:, None] * DV + offs_v[None, :])
    s_mask = mask_k[:, None] & mask_v[None, :]
    s = tl.load(s_ptrs, mask=s_mask, other=0.0)
    s = tl.where(fresh == 0, s, 0.0)  # a fresh request starts from zeros, whatever its row holds

    k_base = k_ptr + layer * stride_kl + hk * DK
    v_base = v_ptr + layer * stride_vl + h * DV
    g_base = g_ptr + layer * stride_gl + h
    b_base = beta_ptr + layer * stride_gl + h
    if GATE:  # g_ptr / beta_ptr hold the raw projections a, b: the gates are computed here
        decay_rate = tl.exp(tl.load(a_log_ptr + layer * HV + h))
        dt_bias = tl.load(dt_bias_ptr + layer * HV + h)
    for t in range(n):
        r = start + t
        kt = tl.load(k_base + r * stride_kt + offs_k, mask=mask_k, other=0.0).to(tl.float32)
        kt = _l2norm(kt, eps)
        vt = tl.load(v_base + r * stride_vt + offs_v, mask=mask_v, other=0.0).to(tl.float32)
        gt = tl.load(g_base + r * stride_gt)
        bt = tl.load(b_base + r * stride_gt)
        if STASH:  # one copy per row and head: the first Dv tile's program writes it
            tl.store(sg_ptr + r * stride_sgt + h, gt.to(sg_ptr.dtype.element_ty), mask=vb == 0)
            tl.store(sb_ptr + r * stride_sgt + h, bt.to(sb_ptr.dtype.element_ty), mask=vb == 0)
        if GATE:
            gt, bt = _gates(gt, bt, decay_rate, dt_bias)
        s = _delta_update(s, kt, vt, gt, bt)
        if WRITE_OUT:
            qt = tl.load(q_ptr + r * stride_qt + hk * DK + offs_k, mask=mask_k,
                         other=0.0).to(tl.float32)
            qt = _l2norm(qt, eps) * scale
            o = tl.sum(s * qt[:, None], axis=0)
            tl.store(out_ptr + r * (HV * DV) + h * DV + offs_v, o.to(out_ptr.dtype.element_ty),
                     mask=mask_v)
    if WRITE_STATE:
        tl.store(s_ptrs, s, mask=s_mask)


@triton.jit
def _conv_taps(x_ptr, cw_ptr, cs_ptr, c, mask, s_row, live, x_row,
               K: tl.constexpr, KP: tl.constexpr):
    """One decode row of the short conv for channels c (kernels/conv.py's numerics): returns
    (silu(round(conv)) rounded to x's dtype, as fp32 [len(c)]; the new window [len(c), KP], fp32,
    entries j < K - 1 meaningful). Reads the old window of conv state row s_row (zeros unless
    live), x row x_row and the taps."""
    j = tl.arange(0, KP)
    m2 = mask[:, None] & (j[None, :] < K - 1)
    win = tl.load(cs_ptr + s_row + c[:, None] * (K - 1) + j[None, :], mask=m2, other=0.0)
    win = tl.where(live, win, 0.0).to(x_ptr.dtype.element_ty).to(tl.float32)
    xv = tl.load(x_ptr + x_row + c, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(cw_ptr + c[:, None] * K + j[None, :], mask=mask[:, None] & (j[None, :] < K),
                other=0.0).to(tl.float32)
    seq = tl.where(j[None, :] == K - 1, xv[:, None], win)  # [w_0 .. w_{K-2}, x]
    g = tl.sum(seq * w, axis=1).to(x_ptr.dtype.element_ty).to(tl.float32)
    y = tl.div_rn(g, 1.0 + tl.exp(-g)).to(x_ptr.dtype.element_ty).to(tl.float32)
    # new window: seq shifted by one (entry j <- seq[j + 1])
    nxt = tl.load(cs_ptr + s_row + c[:, None] * (K - 1) + j[None, :] + 1,
                  mask=m2 & (j[None, :] + 1 < K - 1), other=0.0)
    nxt = tl.where(live, nxt, 0.0).to(x_ptr.dtype.element_ty).to(tl.float32)
    return y, tl.where(j[None, :] + 1 == K - 1, xv[:, None], nxt)


@triton.jit
def _conv_delta_decode_kernel(
        x_ptr, cw_ptr, cs_ptr, a_ptr, b_ptr, out_ptr, state_ptr, rows_ptr, fresh_ptr, cnt_ptr,
        a_log_ptr, dt_bias_ptr, stride_x, stride_ab, stride_cr, stride_sr, scale, eps,
        HK: tl.constexpr, HV: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr,
        BK: tl.constexpr, BV: tl.constexpr, K: tl.constexpr, KP: tl.constexpr,
        PDL: tl.constexpr = 0):
    """DECODE (one row per request) of a Gated DeltaNet layer in one launch: the short conv of
    the row's q, k and v channels (from the conv inputs x and the window pool), then the gated
    delta rule with in-kernel gates, writing the state and the conv windows back.

    Grid (N, Hv, Dv / BV), as _gated_delta_kernel's. A program owns its v channels' windows;
    the q and k channels of key head hk are read by all rep * (Dv / BV) programs of that key
    head, so the last of them to finish reading (an atomic count per request and key head in
    cnt_ptr, left at zero again) writes their new windows."""
    pdl.start(PDL)   # kernels/pdl.py
    b = tl.program_id(0)
    h = tl.program_id(1)
    vb = tl.program_id(2)
    hk = h // (HV // HK)
    row = tl.load(rows_ptr + b).to(tl.int64)
    live = tl.load(fresh_ptr + b) == 0
    x_row = b.to(tl.int64) * stride_x
    c_row = row * stride_cr

    offs_k = tl.arange(0, BK)
    offs_v = vb * BV + tl.arange(0, BV)
    mask_k = offs_k < DK
    mask_v = offs_v < DV
    key_dim = HK * DK
    c_q = hk * DK + offs_k
    c_k = key_dim + hk * DK + offs_k
    c_v = 2 * key_dim + h * DV + offs_v
    qt, win_q = _conv_taps(x_ptr, cw_ptr, cs_ptr, c_q, mask_k, c_row, live, x_row, K, KP)
    kt, win_k = _conv_taps(x_ptr, cw_ptr, cs_ptr, c_k, mask_k, c_row, live, x_row, K, KP)
    vt, win_v = _conv_taps(x_ptr, cw_ptr, cs_ptr, c_v, mask_v, c_row, live, x_row, K, KP)

    s_ptrs = state_ptr + row * stride_sr + h * DK * DV + offs_k[:, None] * DV + offs_v[None, :]
    s_mask = mask_k[:, None] & mask_v[None, :]
    s = tl.load(s_ptrs, mask=s_mask, other=0.0)
    s = tl.where(live, s, 0.0)
    gt, bt = _gates(tl.load(a_ptr + b * stride_ab + h), tl.load(b_ptr + b * stride_ab + h),
                    tl.exp(tl.load(a_log_ptr + h)), tl.load(dt_bias_ptr + h))
    s = _delta_update(s, _l2norm(kt, eps), vt, gt, bt)
    o = tl.sum(s * (_l2norm(qt, eps) * scale)[:, None], axis=0)
    tl.store(out_ptr + b.to(tl.int64) * (HV * DV) + h * DV + offs_v,
             o.to(out_ptr.dtype.element_ty), mask=mask_v)
    tl.store(s_ptrs, s, mask=s_mask)

    j = tl.arange(0, KP)
    w_cols = j[None, :] < K - 1
    tl.debug_barrier()  # this program's window reads are done before any window write
    tl.store(cs_ptr + c_row + c_v[:, None] * (K - 1) + j[None, :], win_v,
             mask=mask_v[:, None] & w_cols)
    done = tl.atomic_add(cnt_ptr + b * HK + hk, 1)  # acq_rel: the other readers' reads are done
    if done == (HV // HK) * tl.num_programs(2) - 1:
        tl.store(cs_ptr + c_row + c_q[:, None] * (K - 1) + j[None, :], win_q,
                 mask=mask_k[:, None] & w_cols)
        tl.store(cs_ptr + c_row + c_k[:, None] * (K - 1) + j[None, :], win_k,
                 mask=mask_k[:, None] & w_cols)
        tl.atomic_xchg(cnt_ptr + b * HK + hk, 0)


def conv_gated_delta_decode(x: torch.Tensor, conv_weight: torch.Tensor, conv_state: torch.Tensor,
                            a: torch.Tensor, b: torch.Tensor, state: torch.Tensor,
                            rows: torch.Tensor, fresh: torch.Tensor, counters: torch.Tensor, *,
                            key_heads: int, gate: tuple[torch.Tensor, torch.Tensor],
                            scale: float = 1.0, eps: float = 1e-6,
                            block_v: int | None = None, num_warps: int | None = None
                            ) -> torch.Tensor:
    """DECODE of one Gated DeltaNet layer in one launch: kernels/conv.causal_conv (one row per
    request, writing the window) followed by gated_delta_rule (gate formed in the kernel, state
    written), with the same numbers.

    x [N, C] the conv inputs (q | k | v channels, C = 2 Hk Dk + Hv Dv; rows may be strided),
    conv_weight [C, K], conv_state [R, C, K-1] fp32 contiguous (one layer), a, b [N, Hv] the raw
    gate projections (one row stride), state [R, Hv, Dk, Dv] fp32 contiguous, rows, fresh int32
    [N], counters int32 [>= N * Hk] zeros (left zero), gate (A_log, dt_bias) fp32 [Hv].
    Returns out [N, Hv, Dv] in x's dtype."""
    n = rows.shape[0]
    hv, dk, dv = state.shape[-3:]
    c, k = conv_weight.shape
    if state.dtype != torch.float32 or not state.is_contiguous() or state.dim() != 4:
        raise ValueError("conv_gated_delta_decode: state must be contiguous fp32 [R, Hv, Dk, Dv]")
    if (conv_state.dtype != torch.float32 or not conv_state.is_contiguous()
            or tuple(conv_state.shape[1:]) != (c, k - 1)):
        raise ValueError(f"conv_gated_delta_decode: conv_state must be contiguous fp32 "
                         f"[R, {c}, {k - 1}]")
    if c != 2 * key_heads * dk + hv * dv or hv % key_heads:
        raise ValueError(f"conv_gated_delta_decode: {c} conv channels are not 2 x {key_heads} x "
                         f"{dk} + {hv} x {dv}")
    if x.dim() != 2 or x.shape != (n, c) or x.stride(-1) != 1 or not conv_weight.is_contiguous():
        raise ValueError(f"conv_gated_delta_decode: x must be [{n}, {c}] with contiguous "
                         "channels and conv_weight contiguous")
    if a.shape != (n, hv) or b.shape != a.shape or a.stride() != b.stride() or a.stride(-1) != 1:
        raise ValueError(f"conv_gated_delta_decode: a and b must be [{n}, {hv}] of one layout")
    if counters.dtype != torch.int32 or counters.numel() < n * key_heads:
        raise ValueError(f"conv_gated_delta_decode: counters must be int32 [>= {n * key_heads}]")
    if any(t.dtype != torch.float32 or t.numel() != hv for t in gate):
        raise ValueError(f"conv_gated_delta_decode: gate parameters must be fp32 [{hv}]")
    out = torch.empty(n, hv, dv, dtype=x.dtype, device=x.device)
    if n == 0:
        return out
    bv = min(max(triton.next_power_of_2(dv), 8), block_v or BLOCK_V)
    _conv_delta_decode_kernel[(n, hv, triton.cdiv(dv, bv))](
        x, conv_weight, conv_state, a, b, out, state, rows, fresh, counters, *gate,
        x.stride(0), a.stride(0), conv_state.stride(0), state.stride(0), scale, eps,
        HK=key_heads, HV=hv, DK=dk, DV=dv, BK=max(triton.next_power_of_2(dk), 16), BV=bv,
        K=k, KP=triton.next_power_of_2(k), num_warps=num_warps or NUM_WARPS,
        **pdl.launch_args(out))
    return out


# Tile width over Dv and warps per program (the defaults), and launch_config() per kind of call.
# Smaller tiles mean more programs with less work per row, so a program walks its rows faster.
# H200, Qwen3.8-27B heads (scripts/gpu_gdn_bench.py --sweep, docs/benchmarks/hybrid.md):
# verify 1 x 16 rows 27.3 -> 14.5 us and 32 x 16 rows 301 -> 157 us with (16, 1); the
# 48-layer commit 121 -> 114 us with (64, 4); decode within 7% of the best with (32, 4).
BLOCK_V = 32
NUM_WARPS = 4


def launch_config(rows_per_request: int, layers: int = 1) -> dict:
    """block_v / num_warps for a call with this many rows per request (and layers)."""
    if layers > 1:
        return dict(block_v=64, num_warps=4)
    if rows_per_request > 1:
        return dict(block_v=16, num_warps=1)
    return dict(block_v=BLOCK_V, num_warps=NUM_WARPS)


def _row_strides(x: torch.Tensor, layered: bool) -> tuple[int, int]:
    """(layer stride, row stride) of a [L, T, W] or [T, W] tensor whose last dim is contiguous."""
    if x.stride(-1) != 1:
        raise ValueError("gated_delta_rule: the head dimension must be contiguous")
    return (x.stride(0) if layered else 0), x.stride(-2)


def gated_delta_rule(q: torch.Tensor | None, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                     beta: torch.Tensor, state: torch.Tensor, rows: torch.Tensor,
                     fresh: torch.Tensor, starts: torch.Tensor, lens: torch.Tensor, *,
                     key_heads: int, scale: float = 1.0, eps: float = 1e-6,
                     write_state: bool = True,
                     gate: tuple[torch.Tensor, torch.Tensor] | None = None,
                     out_dtype: torch.dtype = torch.float32,
                     stash_gates: tuple[torch.Tensor, torch.Tensor] | None = None,
                     block_v: int | None = None, num_warps: int | None = None
                     ) -> torch.Tensor | None:
    """Run the recurrence for len(rows) requests (see the module docstring for layouts).

    q None: no output (the commit); else returns out [T, Hv, Dv] (out_dtype) for q's T rows.
    state [R, Hv, Dk, Dv] (one layer) or [L, R, Hv, Dk, Dv] with k, v, g, beta [L, T, ..].
    rows, fresh, starts, lens: int32 [N] device tensors.
    gate (A_log, dt_bias), fp32 [L, Hv] (or [Hv] for one layer): g and beta are then the raw
    projections a, b (any float dtype, same layout), and the kernel forms Gated DeltaNet's gates
    g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b) (rounded to b's dtype, as torch).
    stash_gates (sg, sb), each [T, Hv] with a contiguous head dim and one row stride (one layer
    only): g and beta as given (the raw a, b under `gate`) are copied there, in the stash's dtype.
    """
    layered = state.dim() == 5
    num_layers = state.shape[0] if layered else 1
    hv, dk, dv = state.shape[-3:]
    if state.dtype != torch.float32 or not state.is_contiguous():
        raise ValueError("gated_delta_rule: state must be contiguous fp32")
    if hv % key_heads:
        raise ValueError(f"{hv} value heads are not a multiple of {key_heads} key heads")
    if g.stride() != beta.stride() or (gate is None and (g.dtype != torch.float32
                                                         or beta.dtype != torch.float32)):
        raise ValueError("gated_delta_rule: g and beta need the same layout (and fp32 unless "
                         "`gate` is given)")
    if gate is not None and any(x.dtype != torch.float32 or x.numel() != num_layers * hv
                                for x in gate):
        raise ValueError(f"gated_delta_rule: gate parameters must be fp32 [{num_layers}, {hv}]")
    kl, kt = _row_strides(k, layered)
    vl, vt = _row_strides(v, layered)
    gl, gt = _row_strides(g, layered)
    n = rows.shape[0]
    out = None
    if q is not None:
        _row_strides(q, False)
        if layered:
            raise ValueError("gated_delta_rule: outputs are for one layer at a time")
        out = torch.empty(q.shape[0], hv, dv, dtype=out_dtype, device=q.device)
    if stash_gates is not None:
        sg, sb = stash_gates
        if (layered or tuple(sg.shape) != tuple(g.shape) or sg.shape != sb.shape
                or sg.stride() != sb.stride() or sg.stride(-1) != 1):
            raise ValueError(f"gated_delta_rule: stash_gates must be two [{g.shape[0]}, {hv}] "
                             "tensors of one layout (one layer)")
    else:
        sg = sb = g
    if n == 0:
        return out
    bk = max(triton.next_power_of_2(dk), 16)
    bv = min(max(triton.next_power_of_2(dv), 8), block_v or BLOCK_V)
    grid = (n, num_layers * hv, triton.cdiv(dv, bv))
    _gated_delta_kernel[grid](
        q if q is not None else k, k, v, g, beta, out if out is not None else g, state,
        rows, fresh, starts, lens, *(gate if gate is not None else (g, g)), sg, sb,
        sg.stride(-2), q.stride(0) if q is not None else 0, kl, kt, vl, vt, gl, gt,
        state.stride(0) if layered else 0, state.stride(-4), scale, eps,
        HK=key_heads, HV=hv, DK=dk, DV=dv, BK=bk, BV=bv,
        WRITE_OUT=q is not None, WRITE_STATE=write_state, GATE=gate is not None,
        STASH=stash_gates is not None, num_warps=num_warps or NUM_WARPS,
        **pdl.launch_args(state))
    return out
