"""Unit tests for specpilot.engine.sampler (CPU)."""

import pytest
import torch

from specpilot.core import SamplingParams
from specpilot.engine.sampler import SamplingBatch, apply_penalties, sample

V = 32


def make(params, steps=None, hist=None, banned=None, vocab=V):
    steps = steps if steps is not None else [0] * len(params)
    return SamplingBatch.from_params(params, steps, hist, vocab, "cpu", banned_until_min=banned)


def rand_logits(b, v=V, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, v, generator=g) * 3).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_greedy_is_argmax(dtype):
    logits = rand_logits(6, dtype=dtype)
    batch = make([SamplingParams(temperature=0.0) for _ in range(6)])
    assert batch.all_greedy
    out = sample(logits, batch)
    assert out.dtype == torch.int64 and out.shape == (6,)
    assert torch.equal(out, logits.float().argmax(-1))


def test_top_k_one_is_argmax():
    logits = rand_logits(5)
    out = sample(logits, make([SamplingParams(temperature=1.5, top_k=1) for _ in range(5)]))
    assert torch.equal(out, logits.argmax(-1))


def test_tiny_top_p_picks_argmax():
    logits = rand_logits(8)
    batch = make([SamplingParams(temperature=1.0, top_p=1e-6) for _ in range(8)])
    assert not batch.all_greedy and batch.has_top_p
    for _ in range(20):
        assert torch.equal(sample(logits, batch), logits.argmax(-1))


def test_min_p_one_picks_argmax():
    logits = rand_logits(8)
    batch = make([SamplingParams(temperature=2.0, min_p=1.0) for _ in range(8)])
    for _ in range(20):
        assert torch.equal(sample(logits, batch), logits.argmax(-1))


def test_top_k_restricts_support():
    logits = rand_logits(4)
    batch = make([SamplingParams(temperature=5.0, top_k=3) for _ in range(3)]
                 + [SamplingParams(temperature=5.0)])  # row 3: top-k off
    top3 = logits.topk(3, dim=-1).indices
    seen_outside = False
    for _ in range(200):
        out = sample(logits, batch)
        for r in range(3):
            assert out[r] in top3[r]
        seen_outside |= bool(out[3] not in top3[3])
    assert seen_outside  # the unrestricted row is not clipped by the other rows' top_k


def test_top_p_support():
    # probs 0.5, 0.3, 0.15, 0.05: top_p=0.7 keeps {0, 1} (0.5 < 0.7 <= 0.8)
    p = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    batch = make([SamplingParams(temperature=1.0, top_p=0.7)], vocab=4)
    drawn = {int(sample(p.log(), batch)) for _ in range(300)}
    assert drawn == {0, 1}


def test_seeded_reproducible_and_batch_independent():
    logits = rand_logits(4, seed=1)
    row = logits[2:3]
    mine = SamplingParams(temperature=1.0, seed=1234)
    alone = [int(sample(row, make([mine], steps=[s]))) for s in range(30)]
    again = [int(sample(row, make([mine], steps=[s]))) for s in range(30)]
    assert alone == again
    assert len(set(alone)) > 1  # the step changes the draw
    others = [SamplingParams(temperature=0.7, top_p=0.9), SamplingParams(temperature=0.0),
              SamplingParams(temperature=1.3, top_k=5, seed=7)]
    for s in range(30):
        batch = make(others[:2] + [mine] + others[2:], steps=[3, 9, s, 11])
        assert int(sample(logits, batch)[2]) == alone[s]


def test_temperature_one_matches_softmax():
    torch.manual_seed(0)
    logits = torch.tensor([[1.0, 0.0, -0.5, 2.0]])
    n = 20000
    batch = make([SamplingParams(temperature=1.0)] * n, vocab=4)
    out = sample(logits.expand(n, 4), batch)
    freq = torch.bincount(out, minlength=4).float() / n
    assert (freq - logits.softmax(-1)[0]).abs().max() < 0.02


def test_temperature_scales_distribution():
    torch.manual_seed(1)
    logits = torch.tensor([[1.0, 0.0, -0.5, 2.0]])
    n = 20000
    batch = make([SamplingParams(temperature=0.5, top_k=3)] * n, vocab=4)
    out = sample(logits.expand(n, 4), batch)
    freq = torch.bincount(out, minlength=4).float() / n
    expect = (logits / 0.5).masked_fill(logits < 0.0, float("-inf")).softmax(-1)[0]
    assert freq[2] == 0
    assert (freq - expect).abs().max() < 0.02


def test_penalties():
    logits = torch.tensor([[2.0, -2.0, 1.0, -1.0, 0.5, 3.0]])
    prompt, output = [0, 1], [2, 2, 3]
    p = SamplingParams(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.25)
    batch = make([p], steps=[3], hist=[(prompt, output)], vocab=6)
    got = apply_penalties(logits, batch)
    expect = torch.tensor([[
        2.0 / 2,  # prompt token, positive: divided
        -2.0 * 2,  # prompt token, negative: multiplied
        1.0 / 2 - 0.5 * 2 - 0.25,  # output twice
        -1.0 * 2 - 0.5 * 1 - 0.25,  # output once
        0.5, 3.0]])  # untouched
    torch.testing.assert_close(got, expect)


def test_penalties_only_on_penalized_rows():
    logits = rand_logits(2, v=6)
    hist = [([0, 1], [2, 3]), ([0, 1], [2, 3])]
    batch = make([SamplingParams(repetition_penalty=1.5, presence_penalty=1.0),
                  SamplingParams()], steps=[2, 2], hist=hist, vocab=6)
    got = apply_penalties(logits, batch)
    assert torch.equal(got[1], logits[1])
    assert not torch.equal(got[0], logits[0])
    # sample() applies them too: a huge presence penalty avoids the generated tokens
    logits = torch.zeros(1, 6)
    logits[0, 2] = 5.0
    batch = make([SamplingParams(temperature=0.0, presence_penalty=2.0, frequency_penalty=2.0)],
                 steps=[2], hist=[([], [2, 2])], vocab=6)
    assert int(sample(logits, batch)) != 2


def test_min_new_tokens_ban():
    logits = torch.zeros(2, 8)
    logits[:, 7] = 10.0  # 7 plays EOS
    p = SamplingParams(temperature=0.0, min_new_tokens=3)
    banned = [[7, 5], [7, 5]]
    before = logits.clone()
    out = sample(logits, make([p, p], steps=[1, 3], banned=banned, vocab=8))
    assert int(out[0]) != 7 and int(out[1]) == 7
    assert torch.equal(logits, before)  # the caller's logits are not written
    # sampled rows too: EOS and 5 never drawn while banned
    q = SamplingParams(temperature=1.0, min_new_tokens=2)
    batch = make([q] * 500, steps=[0] * 500, banned=[[7, 5]] * 500, vocab=8)
    out = sample(logits.new_zeros(500, 8), batch)
    assert not ((out == 7) | (out == 5)).any()


def test_mixed_greedy_and_sampled_rows():
    logits = rand_logits(6, seed=3)
    params = [SamplingParams(temperature=0.0), SamplingParams(temperature=1.0),
              SamplingParams(temperature=0.8, top_k=1), SamplingParams(temperature=1.0, top_p=0.9),
              SamplingParams(temperature=0.0, top_p=0.5), SamplingParams(temperature=3.0)]
    batch = make(params)
    assert not batch.all_greedy
    greedy_rows = [0, 2, 4]
    draws = torch.stack([sample(logits, batch) for _ in range(200)])  # [200, 6]
    for r in greedy_rows:
        assert (draws[:, r] == logits[r].argmax()).all()
    assert len(set(draws[:, 5].tolist())) > 1  # a hot row really samples


def _ref_uniform(key: int, col: int) -> float:
    """seeded_uniform's value in plain Python integers (32-bit hash, no int64 tricks)."""
    def h(x):
        for _ in range(2):
            x = ((x ^ (x >> 16)) * 0x045D9F3B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    r = h((key & 0xFFFFFFFF) ^ h(key >> 32))
    return ((h(r ^ h(col)) >> 9) + 0.5) / 2 ** 23


def test_seeded_uniform_matches_reference_and_is_row_local():
    from specpilot.engine.sampler import seeded_uniform

    keys = [0, 1, 2**63 - 25, 0x9E3779B97F4A7C15, 123456789]
    u = seeded_uniform(keys, 40, "cpu")
    assert u.shape == (5, 40) and u.dtype == torch.float32
    for r, key in enumerate(keys):
        for c in (0, 1, 17, 39):
            assert u[r, c].item() == _ref_uniform(key, c)
    assert torch.equal(seeded_uniform(keys[2:3], 40, "cpu"), u[2:3])  # its key alone
    assert torch.equal(seeded_uniform(keys, 25, "cpu", offset=15), u[:, 15:])
    assert seeded_uniform([], 7, "cpu").shape == (0, 7)


def test_seeded_rows_in_place():
    """seeded_uniform_ / seeded_exponential_ write keys[i]'s row of seeded_uniform (or its -log)
    to out[rows[i]] and nothing else."""
    from specpilot.engine.sampler import seeded_exponential_, seeded_uniform, seeded_uniform_

    keys, rows = [7, 2**63 - 1, 0], [4, 0, 2]
    ref = seeded_uniform(keys, 20, "cpu", offset=3)
    u = torch.full((5, 20), -1.0)
    assert seeded_uniform_(u, rows, keys, offset=3) is u
    assert torch.equal(u[rows], ref) and (u[[1, 3]] == -1.0).all()
    e = torch.full((5, 20), -1.0)
    seeded_exponential_(e, rows, keys, offset=3)
    assert torch.equal(e[rows], ref.log().neg()) and (e[[1, 3]] == -1.0).all()
    assert torch.equal(seeded_exponential_(e, [], [], offset=3), e)


def test_seeded_uniform_is_uniform_and_uncorrelated():
    from specpilot.engine.sampler import seeded_uniform

    u = seeded_uniform(range(200), 5000, "cpu").double()  # 1 M values
    assert 0 < u.min() and u.max() < 1
    assert abs(u.mean().item() - 0.5) < 2e-3 and abs(u.var().item() - 1 / 12) < 1e-3
    counts = torch.histc(u, bins=20, min=0, max=1)
    assert ((counts / (u.numel() / 20)) - 1).abs().max() < 0.02
    for a, b in ((u[:, :-1], u[:, 1:]), (u[:-1], u[1:])):  # neighbouring columns, rows
        assert abs(torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1].item()) < 0.01


def test_seeded_rows_sample_the_softmax():
    """The exponential race with seeded (counter-based) noise draws from p: 20000 requests with
    distinct seeds, one row each."""
    logits = torch.tensor([[1.0, 0.0, -0.5, 2.0]])
    n = 20000
    batch = make([SamplingParams(temperature=1.0, seed=s) for s in range(n)], vocab=4)
    out = sample(logits.expand(n, 4), batch)
    freq = torch.bincount(out, minlength=4).float() / n
    assert (freq - logits.softmax(-1)[0]).abs().max() < 0.02


def test_greedy_step_copies_no_row_params():
    """An all-greedy batch takes the argmax without building its per-row device tensors; a
    mixed one builds them once, in one [5, B] copy, with the values of its params."""
    from specpilot.core import SamplingParams
    from specpilot.engine.sampler import SamplingBatch, sample

    logits = torch.randn(3, 11)
    sb = SamplingBatch.from_params([SamplingParams(temperature=0)] * 3, [0] * 3, None, 11, "cpu")
    assert torch.equal(sample(logits, sb), logits.argmax(-1)) and sb.batch_size == 3
    assert "_row_params" not in vars(sb)
    params = [SamplingParams(temperature=0), SamplingParams(temperature=0.5, top_k=4, top_p=0.9,
                                                           min_p=0.1, seed=1)]
    sb = SamplingBatch.from_params(params, [0, 0], None, 11, "cpu")
    sample(logits[:2], sb)
    assert vars(sb)["_row_params"].shape == (5, 2)
    assert sb.temperature.tolist() == [1.0, 0.5] and sb.greedy.tolist() == [True, False]
    assert sb.top_k.tolist() == [11, 4] and sb.top_k.dtype == torch.int64
    torch.testing.assert_close(sb.top_p, torch.tensor([1.0, 0.9]))
    torch.testing.assert_close(sb.min_p, torch.tensor([0.0, 0.1]))


def test_row_subset_keeps_each_rows_params():
    """propose._rows (a drafter's sampled rows): the subset's per-row params and seeds are
    those of the rows it names, in that order."""
    from specpilot.core import SamplingParams
    from specpilot.engine.sampler import SamplingBatch
    from specpilot.spec.propose import _rows

    params = [SamplingParams(temperature=t, top_k=k, seed=s)
              for t, k, s in ((0.3, 2, 7), (0, -1, None), (0.9, 5, 8))]
    sb = SamplingBatch.from_params(params, [0, 1, 2], None, 11, "cpu")
    sub = _rows(sb, torch.tensor([2, 0]))
    assert sub.batch_size == 2 and sub.seeds == [8, 7]
    assert sub.generator_seeds == [sb.generator_seeds[2], sb.generator_seeds[0]]
    torch.testing.assert_close(sub.temperature, torch.tensor([0.9, 0.3]))
    assert sub.top_k.tolist() == [5, 2] and sub.greedy.tolist() == [False, False]


def test_top_k_ties_do_not_depend_on_the_batch():
    """top_k keeps every token tied with the k-th logit whether or not another row of the batch
    has top_p < 1 (the sort path kept exactly k: a seeded row's tokens changed with its
    neighbours; ties at the k-th logit are common in bf16)."""
    from specpilot.engine.sampler import probs
    row = torch.tensor([[5.0, 3.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    mine = SamplingParams(temperature=1.0, top_k=2, seed=7)
    other = SamplingParams(temperature=1.0, top_p=0.9)
    alone = probs(row, make([mine], vocab=8))[0]
    assert alone[1] == alone[2] > 0 and alone[3:].sum() == 0   # both tied tokens kept
    mixed = probs(torch.cat([row, row]), make([mine, other], vocab=8))[0]
    torch.testing.assert_close(mixed, alone)
    for s in range(50):
        a = sample(row, make([mine], steps=[s], vocab=8))
        m = sample(torch.cat([row, row]), make([mine, other], steps=[s, s], vocab=8))
        assert a[0] == m[0], s


def test_tiny_temperature_is_greedy():
    """A temperature below 1e-5 is greedy (logits / 1e-38 overflowed to NaN probabilities and
    token 0 was drawn)."""
    logits = torch.zeros(3, V)
    logits[:, 5], logits[:, 6] = 40.0, 39.0
    for t in (1e-3, 1e-6, 1e-38, 1e-40):
        assert SamplingParams(temperature=t).greedy == (t < 1e-5)
        assert sample(logits, make([SamplingParams(temperature=t, seed=1)] * 3)).tolist() == [5] * 3
