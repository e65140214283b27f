"""DSpark's greedy Markov walk: one Triton launch per slot instead of ~6.

Greedy DSpark (spec/propose.py `_sequential`) picks slot j's token as
    e      = markov_w1[prev]                                  [r]   (the Markov embedding)
    bias   = markov_w2 @ e, rounded to markov_w2's dtype       [V]   (nn.Linear's output)
    tok_j  = argmax_v (head[j, v] + bias[v])   (the first maximum)
    prev   = tok_j
In torch a slot is an embedding gather, the [1, r] x [r, V] GEMM, a cast, an add and an argmax
(two launches for one row of 200k+), each a few microseconds in the step graph besides the GEMM's
read of markov_w2 (127 MB on Qwen3.8-27B's vocabulary; 7 slots a step there, 15 on
Muse-Glimmer-30B). Here slot j is one launch over (request, chunk of BV vocabulary rows): each
program takes the previous slot's token from the previous launch's per-chunk maxima (or the
anchor), computes its rows' bias and logits and stores its chunk's maximum and index; one last
launch reduces every slot's maxima into the tokens. The bias sums over r in another order than
the GEMM, so it may differ from torch's in the last bit before rounding, and a near-tie may pick
the other token: another draft, never another output (verification decides). A NaN logit ranks
as -inf.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BV = 512       # vocabulary rows per program (485 programs a request on a 248320-token vocabulary)
SUB = 32       # rows per inner step (SUB x rank weights: 64 a thread at rank 256, 4 warps)


@triton.jit
def _pick(val_ptr, idx_ptr, base, NC, BNC: tl.constexpr):
    """The first maximum over the NC chunk maxima at base: (its value, its vocabulary index)."""
    offs = tl.arange(0, BNC)
    m = offs < NC
    v = tl.load(val_ptr + base + offs, mask=m, other=float("-inf"))
    best = tl.argmax(v, axis=0, tie_break_left=True)
    return tl.load(idx_ptr + base + best)


@triton.jit
def _markov_slot_kernel(head_ptr, w1_ptr, w2_ptr, anchor_ptr, val_ptr, idx_ptr, j, P, V, NC,
                        RANK: tl.constexpr, BR: tl.constexpr, BV: tl.constexpr,
                        SUB: tl.constexpr, BNC: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    if j == 0:
        prev = tl.load(anchor_ptr + r).to(tl.int64)
    else:
        prev = _pick(val_ptr, idx_ptr, (r * P + j - 1) * NC, NC, BNC).to(tl.int64)
    offs_i = tl.arange(0, BR)
    mi = offs_i < RANK
    e = tl.load(w1_ptr + prev * RANK + offs_i, mask=mi, other=0.0).to(tl.float32)
    best_v = float("-inf")
    best_i = 0
    for s in range(BV // SUB):
        rows = c * BV + s * SUB + tl.arange(0, SUB)
        mr = rows < V
        w = tl.load(w2_ptr + rows.to(tl.int64)[:, None] * RANK + offs_i[None, :],
                    mask=mr[:, None] & mi[None, :], other=0.0)
        bias = tl.sum(w.to(tl.float32) * e[None, :], axis=1).to(w.dtype).to(tl.float32)
        logit = tl.load(head_ptr + (r * P + j) * V + rows, mask=mr, other=0.0) + bias
        logit = tl.where(mr & (logit == logit), logit, float("-inf"))
        k = tl.argmax(logit, axis=0, tie_break_left=True)
        v = tl.max(logit, axis=0)
        take = v > best_v            # strictly greater: an earlier sub-block keeps a tie
        best_i = tl.where(take, c * BV + s * SUB + k, best_i)
        best_v = tl.where(take, v, best_v)
    tl.store(val_ptr + (r * P + j) * NC + c, best_v)
    tl.store(idx_ptr + (r * P + j) * NC + c, best_i)


@triton.jit
def _markov_tokens_kernel(val_ptr, idx_ptr, out_ptr, P, NC, BNC: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)   # r * P + j
    tl.store(out_ptr + row, _pick(val_ptr, idx_ptr, row * NC, NC, BNC).to(tl.int64))


def markov_greedy_walk(head: torch.Tensor, anchors: torch.Tensor, markov_w1: torch.Tensor,
                       markov_w2: torch.Tensor) -> torch.Tensor:
    """head [R, P, V] fp32 (the drafter's logits of every slot), anchors [R], markov_w1 [V, r]
    (the embedding), markov_w2 [V, r] (the Linear's weight) -> tokens [R, P] int64 (module
    doc)."""
    n, p, vocab = head.shape
    rank = markov_w1.shape[-1]
    if (anchors.shape != (n,) or markov_w1.shape != (vocab, rank)
            or markov_w2.shape != (vocab, rank)):
        raise ValueError(f"markov_greedy_walk: shapes head {tuple(head.shape)}, anchors "
                         f"{tuple(anchors.shape)}, markov_w1 {tuple(markov_w1.shape)}, markov_w2 "
                         f"{tuple(markov_w2.shape)} do not fit together")
    if head.dtype != torch.float32:
        raise ValueError("markov_greedy_walk: head must be fp32 (the drafter's logits)")
    out = torch.empty(n, p, dtype=torch.int64, device=head.device)
    if n == 0 or p == 0:
        return out
    nc = triton.cdiv(vocab, BV)
    vals = torch.empty(n, p, nc, dtype=torch.float32, device=head.device)
    idxs = torch.empty(n, p, nc, dtype=torch.int32, device=head.device)
    head, anchors = head.contiguous(), anchors.contiguous()
    w1, w2 = markov_w1.detach().contiguous(), markov_w2.detach().contiguous()
    bnc = max(triton.next_power_of_2(nc), 2)
    br = max(triton.next_power_of_2(rank), 16)
    for j in range(p):
        _markov_slot_kernel[(n, nc)](head, w1, w2, anchors, vals, idxs, j, p, vocab, nc,
                                     RANK=rank, BR=br, BV=BV, SUB=SUB, BNC=bnc, num_warps=4)
    _markov_tokens_kernel[(n * p,)](vals, idxs, out, p, nc, BNC=bnc, num_warps=4)
    return out
