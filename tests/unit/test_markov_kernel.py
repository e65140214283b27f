"""DSpark's greedy Markov walk in Triton (specpilot/kernels/markov.py) against the torch walk of
spec/propose.py (head + MarkovHead slot by slot). Without CUDA the kernels run in Triton's
interpreter on CPU tensors (tests/conftest.py)."""

from __future__ import annotations

import pytest
import torch

from specpilot.kernels import markov as mk
from specpilot.spec.heads import MarkovHead

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def torch_walk(head_mod, head, prev):
    toks = []
    for j in range(head.shape[1]):
        prev = (head[:, j] + head_mod(prev)).argmax(dim=-1)
        toks.append(prev)
    return torch.stack(toks, dim=1)


@pytest.mark.parametrize("r,p,vocab,rank,dtype", [(1, 7, 1100, 256, torch.float32),
                                                  (3, 4, 700, 24, torch.float32),
                                                  (2, 3, 513, 64, torch.float16)])
def test_markov_walk_equals_the_torch_walk(r, p, vocab, rank, dtype):
    """Several chunks of BV rows, a last partial chunk and sub-block, a rank that is not a power
    of two; fp16 weights round the bias as nn.Linear's fp16 output does."""
    torch.manual_seed(r * 100 + p)
    mh = MarkovHead(vocab, rank).to(DEV)
    with torch.no_grad():
        mh.markov_w1.weight.normal_()
        mh.markov_w2.weight.normal_(0, 0.3)
        mh.to(dtype)
        head = torch.randn(r, p, vocab, device=DEV)
        prev = torch.randint(0, vocab, (r,), device=DEV)
        want = torch_walk(mh, head, prev)
        got = mk.markov_greedy_walk(head, prev, mh.markov_w1.weight, mh.markov_w2.weight)
    assert got.dtype == torch.int64 and got.tolist() == want.tolist()


def test_markov_walk_first_maximum_nan_and_errors():
    vocab, rank = 2 * mk.BV + 5, 16
    w1 = torch.zeros(vocab, rank, device=DEV)
    w2 = torch.zeros(vocab, rank, device=DEV)
    head = torch.zeros(1, 3, vocab, device=DEV)
    # slot 0: equal maxima in two chunks -> the first; slot 1: equal maxima inside one chunk, in
    # two sub-blocks -> the first; slot 2: NaN logits rank as -inf
    head[0, 0, [mk.BV + 3, 7]] = 2.0
    head[0, 1, [2 * mk.SUB + 1, mk.SUB - 1]] = 1.0
    head[0, 2] = float("nan")
    head[0, 2, 2 * mk.BV + 4] = -5.0
    got = mk.markov_greedy_walk(head, torch.tensor([0], device=DEV), w1, w2)
    assert got.tolist() == [[7, mk.SUB - 1, 2 * mk.BV + 4]]
    # the previous slot's token selects the bias: w1[token] . w2[v] lifts row v = token + 1
    w1 = torch.eye(vocab, rank, device=DEV)   # e = one-hot(prev) for prev < rank
    w2 = torch.zeros(vocab, rank, device=DEV)
    for t in range(rank - 1):
        w2[t + 1, t] = 10.0                    # bias[t + 1] = 10 when prev = t
    head = torch.zeros(1, 4, vocab, device=DEV)
    got = mk.markov_greedy_walk(head, torch.tensor([2], device=DEV), w1, w2)
    assert got.tolist() == [[3, 4, 5, 6]]
    with pytest.raises(ValueError, match="do not fit"):
        mk.markov_greedy_walk(head, torch.tensor([2], device=DEV), w1[:, :3], w2)
    with pytest.raises(ValueError, match="fp32"):
        mk.markov_greedy_walk(head.half(), torch.tensor([2], device=DEV), w1, w2)
