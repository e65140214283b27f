"""Top-k over a vocabulary row in two Triton launches (DFlash2's head candidates).

Greedy DFlash2 (spec/propose.py `_sequential`) needs, for every drafted slot, the K best head
logits and their token ids. torch's `logits.float() * multiplier` (and a softcap), then
`topk`, costs an fp32 copy of the [rows, V] logits and a radix select of about 20 launches;
here:
    stage 1  grid (rows, cdiv(V, CHUNK)): each program transforms its chunk of the row (fp32,
             x * multiplier, then cap * tanh(x / cap) with a softcap) and keeps its K best;
    stage 2  grid (rows,): the K best of the row's cdiv(V, CHUNK) * K survivors, sorted.
Each selection round takes the maximum and, among equal values, the smallest token id; so the
result is sorted by value, ties by id (torch.topk leaves the order of ties open). tanh is
computed as 1 - 2 / (exp(2u) + 1): within a few ulps of torch's. These values only steer the
draft, never the output (verification decides). NaN ranks as -inf (torch.topk ranks it above
+inf): every returned id is a real token id even for a row of NaNs, which would otherwise select
no index and hand the draft the "no index" sentinel 2^31 - 1, an out-of-range gather downstream.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

CHUNK = 4096  # vocabulary entries per stage-1 program
NO_INDEX = 2 ** 31 - 1  # "no index" in the min-index reductions
_BIG = tl.constexpr(NO_INDEX)


@triton.jit
def _select(vals, idx, taken, out_v, out_i, K: tl.constexpr, KP: tl.constexpr):
    """K rounds: the largest value not yet taken, the smallest index among equal ones ->
    (out_v, out_i) [KP] (entries >= K: -inf, _BIG). Entries with no real index are never taken."""
    slot = tl.arange(0, KP)
    for i in tl.static_range(K):
        m = tl.max(tl.where(taken, float("-inf"), vals), axis=0)
        j = tl.min(tl.where(~taken & (vals == m), idx, _BIG), axis=0)
        out_v = tl.where(slot == i, m, out_v)
        out_i = tl.where(slot == i, j, out_i)
        taken = taken | (idx == j)
    return out_v, out_i


@triton.jit
def _chunk_topk_kernel(x_ptr, val_ptr, idx_ptr, V, stride_x, multiplier, cap,
                       K: tl.constexpr, KP: tl.constexpr, CH: tl.constexpr,
                       SOFTCAP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    ch = tl.program_id(1)
    offs = ch * CH + tl.arange(0, CH)
    ok = offs < V
    x = tl.load(x_ptr + row * stride_x + offs, mask=ok, other=0.0).to(tl.float32) * multiplier
    if SOFTCAP:
        x = cap * (1.0 - 2.0 / (tl.exp(2.0 * (x / cap)) + 1.0))
    # NaN ranks as -inf: NaN equals nothing, so a NaN maximum would select no index (module doc)
    x = tl.where(x != x, float("-inf"), x)
    out_v, out_i = _select(x, offs, ~ok, tl.full([KP], float("-inf"), tl.float32),
                           tl.full([KP], _BIG, tl.int32), K, KP)
    dst = (row * tl.num_programs(1) + ch) * KP + tl.arange(0, KP)
    tl.store(val_ptr + dst, out_v)
    tl.store(idx_ptr + dst, out_i)


@triton.jit
def _merge_topk_kernel(val_ptr, idx_ptr, out_v_ptr, out_i_ptr, N,
                       K: tl.constexpr, KP: tl.constexpr, NP: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, NP)
    ok = offs < N
    vals = tl.load(val_ptr + row * N + offs, mask=ok, other=float("-inf"))
    idx = tl.load(idx_ptr + row * N + offs, mask=ok, other=_BIG)
    out_v, out_i = _select(vals, idx, idx == _BIG, tl.full([KP], float("-inf"), tl.float32),
                           tl.full([KP], _BIG, tl.int32), K, KP)
    keep = tl.arange(0, KP) < K
    tl.store(out_v_ptr + row * K + tl.arange(0, KP), out_v, mask=keep)
    tl.store(out_i_ptr + row * K + tl.arange(0, KP), out_i.to(tl.int64), mask=keep)


def topk_rows(x: torch.Tensor, k: int, multiplier: float = 1.0, softcap: float | None = None,
              chunk: int = CHUNK) -> tuple[torch.Tensor, torch.Tensor]:
    """x [R, V] (any float dtype, rows may be strided, V < 2^31 - 1) -> (values fp32 [R, k],
    indices int64 [R, k]): the k largest of t(x) = x.float() * multiplier (then softcap *
    tanh(t / softcap)), sorted by value, ties by index (see the module docstring)."""
    if x.dim() != 2 or x.stride(-1) != 1:
        raise ValueError(f"topk_rows: x must be [R, V] with a contiguous last dim, got "
                         f"{tuple(x.shape)} strides {x.stride()}")
    r, v = x.shape
    if not 1 <= k <= min(v, chunk) or v >= NO_INDEX:
        raise ValueError(f"topk_rows: k = {k} must be in 1..min(V = {v}, chunk = {chunk})")
    if softcap is not None and not softcap > 0:
        raise ValueError(f"topk_rows: softcap must be positive, got {softcap}")
    kp = triton.next_power_of_2(k)
    n_ch = triton.cdiv(v, chunk)
    vals = torch.empty(r, n_ch * kp, dtype=torch.float32, device=x.device)
    idx = torch.empty(r, n_ch * kp, dtype=torch.int32, device=x.device)
    out_v = torch.empty(r, k, dtype=torch.float32, device=x.device)
    out_i = torch.empty(r, k, dtype=torch.int64, device=x.device)
    if r == 0:
        return out_v, out_i
    _chunk_topk_kernel[(r, n_ch)](x, vals, idx, v, x.stride(0), float(multiplier),
                                  float(softcap or 1.0), K=k, KP=kp, CH=chunk,
                                  SOFTCAP=softcap is not None, num_warps=4)
    _merge_topk_kernel[(r,)](vals, idx, out_v, out_i, n_ch * kp, K=k, KP=kp,
                             NP=triton.next_power_of_2(n_ch * kp), num_warps=4)
    return out_v, out_i
