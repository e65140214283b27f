"""Accept rules: greedy prefix match, and chain rejection sampling preserves the target's law."""

import pytest
import torch

from specpilot.spec.accept import greedy_accept, rejection_accept


def test_greedy_accept_every_length():
    target = torch.tensor([[5, 6, 7, 8, 9]])  # argmax after each of 5 block rows
    for a in range(5):
        draft = target[:, :4].clone()
        if a < 4:
            draft[0, a] = 0  # first mismatch at a
        acc, bonus = greedy_accept(draft, target)
        assert acc.item() == a and bonus.item() == target[0, a].item()


def first_tokens(p, q, n=200_000, seed=0):
    """Empirical law of the first emitted token with a 1-draft chain (draft drawn from q)."""
    g = torch.Generator().manual_seed(seed)
    v = p.shape[-1]
    draft = torch.multinomial(q, n, replacement=True, generator=g)[:, None]  # [n, 1]
    qq = q.expand(n, 1, v)
    pp = torch.stack([p, torch.full((v,), 1.0 / v)]).expand(n, 2, v)
    u = torch.rand(n, 1, generator=g)
    e = torch.empty(n, v).exponential_(generator=g)
    acc, nxt = rejection_accept(draft, qq, pp, u, e)
    first = torch.where(acc > 0, draft[:, 0], nxt)
    return torch.bincount(first, minlength=v).float() / n


@pytest.mark.parametrize("seed", [0, 1])
def test_rejection_sampling_matches_target(seed):
    g = torch.Generator().manual_seed(seed + 10)
    p = torch.softmax(torch.randn(6, generator=g) * 2, -1)
    q = torch.softmax(torch.randn(6, generator=g) * 2, -1)
    emp = first_tokens(p, q, seed=seed)
    tv = 0.5 * (emp - p).abs().sum().item()
    assert tv < 0.01, tv  # sampling noise at n=200k is ~0.003
    # the test can fail: the draft's own law (what a rule that always accepts emits) is far off
    assert 0.5 * (q - p).abs().sum().item() > 0.05


def test_wrong_rule_is_detected():
    """Sampling the residual from p instead of max(p - q, 0) is biased; the TV test sees it."""
    g = torch.Generator().manual_seed(3)
    p = torch.softmax(torch.randn(6, generator=g) * 2, -1)
    q = torch.softmax(torch.randn(6, generator=g) * 2, -1)
    n, v = 200_000, 6
    draft = torch.multinomial(q, n, replacement=True, generator=g)[:, None]
    u = torch.rand(n, 1, generator=g)
    ok = u[:, 0] * q[draft[:, 0]] < p[draft[:, 0]]
    wrong = torch.where(ok, draft[:, 0], torch.multinomial(p, n, replacement=True, generator=g))
    emp = torch.bincount(wrong, minlength=v).float() / n
    assert 0.5 * (emp - p).abs().sum().item() > 0.02


def test_all_accepted_draws_bonus_from_last_row():
    p = torch.zeros(1, 3, 4)
    p[0, 0, 1] = p[0, 1, 2] = 1.0
    p[0, 2, 3] = 1.0
    q = torch.zeros(1, 2, 4)
    q[0, 0, 1] = q[0, 1, 2] = 1.0
    acc, nxt = rejection_accept(torch.tensor([[1, 2]]), q, p, torch.zeros(1, 2),
                                torch.ones(1, 4))
    assert acc.item() == 2 and nxt.item() == 3
