"""DFlash2's greedy candidate walk in one Triton launch.

Greedy DFlash2 (spec/propose.py `_sequential`) picks slot j's token among its K head candidates
by the selector score, which depends on the token picked for slot j - 1:
    a      = predecessor_codebook[prev]                          [r] fp32
    s_k    = unary[j, k] + sum_i a_i * proj[j, i] * succ[j, k, i]   (k < K)
    tok_j  = cand[j, argmax_k s_k]   (the first maximum: candidates come sorted by head logit)
    prev   = tok_j
In torch that walk is ~7 small launches per slot (a gather, a cast, a product, a batched GEMM,
an add, an argmax, a gather): ~50 for an 8-row block and ~100 for 16 rows, each a few
microseconds in the step graph. Here one program walks one request's P slots with its rows in
registers. The sum over i runs in another order than torch's batched GEMM, so scores agree to
fp32 rounding and a near-tie between two candidates may pick the other one: a different draft,
never a different output (verification decides). A NaN score ranks as -inf, so the pick is
always one of the slot's K candidates. Inputs are the block-wide parts that
CandidateSelector.prepare computes once per step.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _greedy_walk_kernel(proj_ptr, succ_ptr, unary_ptr, cand_ptr, prev_ptr, book_ptr, out_ptr,
                        P, K, RANK, BK: tl.constexpr, BR: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    offs_k = tl.arange(0, BK)
    offs_i = tl.arange(0, BR)
    mk = offs_k < K
    mi = offs_i < RANK
    prev = tl.load(prev_ptr + r).to(tl.int64)
    for j in range(P):
        row = r * P + j
        a = tl.load(book_ptr + prev * RANK + offs_i, mask=mi, other=0.0).to(tl.float32)
        w = a * tl.load(proj_ptr + row * RANK + offs_i, mask=mi, other=0.0)
        s = tl.load(succ_ptr + (row * K + offs_k[:, None]) * RANK + offs_i[None, :],
                    mask=mk[:, None] & mi[None, :], other=0.0)
        score = tl.load(unary_ptr + row * K + offs_k, mask=mk, other=0.0).to(tl.float32) \
            + tl.sum(s * w[None, :], axis=1)
        score = tl.where(mk & (score == score), score, float("-inf"))   # NaN as -inf
        best = tl.argmax(score, axis=0, tie_break_left=True)
        prev = tl.load(cand_ptr + row * K + best).to(tl.int64)
        tl.store(out_ptr + row, prev)


def greedy_walk(proj: torch.Tensor, succ: torch.Tensor, unary: torch.Tensor, cand: torch.Tensor,
                prev: torch.Tensor, predecessor_codebook: torch.Tensor) -> torch.Tensor:
    """proj [R, P, r] fp32, succ [R, P, K, r] fp32, unary [R, P, K], cand [R, P, K] int64 (as
    CandidateSelector.prepare and the head's top-k give them), prev [R] (the anchors),
    predecessor_codebook [V, r] -> tokens [R, P] int64 (module doc)."""
    n, p, rank = proj.shape
    k = cand.shape[-1]
    if (succ.shape != (n, p, k, rank) or unary.shape != (n, p, k) or prev.shape != (n,)
            or predecessor_codebook.shape[-1] != rank):
        raise ValueError(f"greedy_walk: shapes proj {tuple(proj.shape)}, succ "
                         f"{tuple(succ.shape)}, unary {tuple(unary.shape)}, cand "
                         f"{tuple(cand.shape)}, prev {tuple(prev.shape)}, codebook "
                         f"{tuple(predecessor_codebook.shape)} do not fit together")
    if proj.dtype != torch.float32 or succ.dtype != torch.float32:
        raise ValueError("greedy_walk: proj and succ must be fp32 (CandidateSelector.prepare)")
    out = torch.empty(n, p, dtype=torch.int64, device=proj.device)
    if n == 0 or p == 0:
        return out
    proj, succ, unary, cand = (x.contiguous() for x in (proj, succ, unary, cand))
    book = predecessor_codebook.detach().contiguous()
    _greedy_walk_kernel[(n,)](proj, succ, unary, cand, prev.contiguous(), book, out, p, k, rank,
                              BK=max(triton.next_power_of_2(k), 2),
                              BR=max(triton.next_power_of_2(rank), 16), num_warps=4)
    return out
