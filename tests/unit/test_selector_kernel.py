"""DFlash2's greedy candidate walk in one Triton launch (specpilot/kernels/selector.py) against
the torch walk of spec/propose.py (CandidateSelector.scores_from slot by slot). Without CUDA the
kernel runs in Triton's interpreter on CPU tensors (tests/conftest.py)."""

from __future__ import annotations

import pytest
import torch

from specpilot.kernels.selector import greedy_walk
from specpilot.spec.heads import CandidateSelector

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def torch_walk(sel, proj, succ, unary, cand, prev):
    toks = []
    for j in range(proj.shape[1]):
        score = sel.scores_from(proj[:, j], succ[:, j], unary[:, j], prev)
        prev = cand[:, j].gather(1, score.argmax(dim=-1, keepdim=True)).squeeze(1)
        toks.append(prev)
    return torch.stack(toks, dim=1)


@pytest.mark.parametrize("r,p,k,rank,book_dtype", [(1, 7, 16, 256, torch.float32),
                                                   (3, 15, 16, 64, torch.float32),
                                                   (2, 5, 5, 24, torch.float16)])
def test_greedy_walk_equals_the_torch_walk(r, p, k, rank, book_dtype):
    torch.manual_seed(r * 100 + p)
    vocab, hidden = 300, 32
    sel = CandidateSelector(hidden, vocab, rank).to(DEV)
    with torch.no_grad():
        sel.predecessor_codebook.normal_()
        sel.successor_codebook.normal_()
        sel.to(book_dtype)
        h = torch.randn(r, p, hidden, device=DEV, dtype=book_dtype)
        unary, cand = torch.randn(r, p, vocab, device=DEV).topk(k, dim=-1)
        prev = torch.randint(0, vocab, (r,), device=DEV)
        proj, succ = sel.prepare(h, cand)
        want = torch_walk(sel, proj, succ, unary, cand, prev)
        got = greedy_walk(proj, succ, unary, cand, prev, sel.predecessor_codebook)
    assert got.dtype == torch.int64 and got.tolist() == want.tolist()


def test_greedy_walk_first_maximum_and_errors():
    # equal scores: the first candidate (the higher head logit) wins, as torch's argmax
    proj = torch.zeros(1, 2, 4, device=DEV)
    succ = torch.zeros(1, 2, 3, 4, device=DEV)
    unary = torch.tensor([[[1.0, 1.0, 0.5], [0.2, 0.7, 0.7]]], device=DEV)
    cand = torch.tensor([[[5, 6, 7], [8, 9, 10]]], device=DEV)
    book = torch.ones(11, 4, device=DEV)
    got = greedy_walk(proj, succ, unary, cand, torch.tensor([0], device=DEV), book)
    assert got.tolist() == [[5, 9]]
    # NaN scores (a broken layer upstream) rank as -inf: the pick stays one of the candidates,
    # here with K = 3 in a block of 4 lanes (the fourth is padding)
    nan = torch.full_like(unary, float("nan"))
    nan[0, 1, 2] = 0.0
    got = greedy_walk(proj, succ, nan, cand, torch.tensor([0], device=DEV), book)
    assert got.tolist() == [[5, 10]]
    with pytest.raises(ValueError, match="do not fit"):
        greedy_walk(proj, succ[:, :1], unary, cand, torch.tensor([0], device=DEV), book)
    with pytest.raises(ValueError, match="fp32"):
        greedy_walk(proj.half(), succ, unary, cand, torch.tensor([0], device=DEV), book)
