"""kernels/conv.causal_conv against the torch math of the uniform path (interpreter on CPU)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from specpilot.kernels.conv import causal_conv

C, K, R = 40, 4, 6
CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
# the interpreter rounds fp32 -> bf16 by truncation: CPU runs fp32 / fp16 (as test_norm_kernels)
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if CUDA else [])
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2)}


def _reference(x, weight, conv_state, rows, fresh, t):
    """The uniform branch of TensorRecurrentBatch.conv: (y [N*T, C], new windows [N, C, K-1])."""
    n, c = rows.shape[0], weight.shape[0]
    window = conv_state[rows.long()] * (fresh == 0).to(torch.float32)[:, None, None]
    seq = torch.cat([window.to(x.dtype), x.reshape(n, t, c).transpose(1, 2)], dim=2)
    y = F.silu(F.conv1d(seq, weight[:, None, :], groups=c))
    return y.transpose(1, 2).reshape(n * t, c).contiguous(), seq[:, :, t:].float()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,t", [(1, 1), (1, 5), (3, 1), (3, 5), (2, 2), (2, 20)])  # 2 < K - 1; 20: chunks of 16 + 4
@pytest.mark.parametrize("write_state", [False, True])
def test_causal_conv_matches_torch(dtype, n, t, write_state):
    gen = torch.Generator().manual_seed(n * 10 + t)
    wide = torch.randn(n * t, 2 * C + 8, generator=gen).to(DEVICE, dtype)
    x = wide[:, 8:8 + C]  # a column slice: row stride 2C + 8
    weight = (torch.randn(C, K, generator=gen) * 0.5).to(DEVICE, dtype)
    state = torch.randn(R, C, K - 1, generator=gen).to(DEVICE)
    rows = torch.tensor([4, 1, 2][:n], dtype=torch.int32, device=DEVICE)
    fresh = torch.tensor([0, 1, 0][:n] if n > 1 else [1], dtype=torch.int32, device=DEVICE)
    ref_y, ref_win = _reference(x, weight, state, rows, fresh, t)
    before = state.clone()

    y = causal_conv(x, weight, state, rows, fresh, t, write_state)

    assert y.dtype == dtype and y.shape == (n * t, C) and y.is_contiguous()
    torch.testing.assert_close(y, ref_y, **TOL[dtype])
    if write_state:
        expect = before.clone()
        expect[rows.long()] = ref_win
        assert torch.equal(state, expect)  # exact: copies of the (rounded) inputs
    else:
        assert torch.equal(state, before)


def test_causal_conv_fresh_ignores_row_contents():
    x = torch.randn(3, C, device=DEVICE)
    weight = torch.randn(C, K, device=DEVICE)
    state = torch.full((2, C, K - 1), float("nan"), device=DEVICE)
    one = torch.ones(1, dtype=torch.int32, device=DEVICE)
    y = causal_conv(x, weight, state, one, one, 3, False)
    ref, _ = _reference(x, weight, torch.zeros(2, C, K - 1, device=DEVICE), one, one * 0, 3)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_causal_conv_stash_copies_inputs_and_kv(dtype):
    """VERIFY's stash: x and the outputs past the first KD channels land in the stash views
    (row-strided slices of a larger buffer), bit for bit, in the same launch."""
    n, t, kd = 2, 3, 16
    x = torch.randn(n * t, C, device=DEVICE).to(dtype)
    weight = torch.randn(C, K, device=DEVICE).to(dtype)
    state = torch.randn(R, C, K - 1, device=DEVICE)
    rows = torch.tensor([3, 0], dtype=torch.int32, device=DEVICE)
    fresh = torch.tensor([0, 1], dtype=torch.int32, device=DEVICE)
    sx = torch.full((2, n * t + 2, C), -7.0, device=DEVICE).to(dtype)
    skv = torch.full((2, n * t + 2, C - kd), -7.0, device=DEVICE).to(dtype)
    before = state.clone()

    y = causal_conv(x, weight, state, rows, fresh, t, False,
                    stash=(sx[1, :n * t], skv[1, :n * t], kd))

    assert torch.equal(y, causal_conv(x, weight, state, rows, fresh, t, False))
    assert torch.equal(sx[1, :n * t], x) and torch.equal(skv[1, :n * t], y[:, kd:])
    assert (sx[0] == -7).all() and (sx[1, n * t:] == -7).all() and (skv[0] == -7).all()
    assert torch.equal(state, before)
    with pytest.raises(ValueError, match="stash"):
        causal_conv(x, weight, state, rows, fresh, t, False, stash=(sx[1], skv[1], kd))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t", [1, 2, 5])  # 1, 2 < K - 1: part of the old window stays
def test_commit_windows_equals_the_gather(dtype, t):
    """VERIFY's commit: each request's window becomes the K-1 conv inputs before row keep[b],
    taken from [old window (zeros when fresh), stashed inputs]; other rows of the pool keep
    theirs. Bit for bit the torch gather the commit did before (pure copies)."""
    from specpilot.kernels.conv import commit_windows

    gen = torch.Generator().manual_seed(40 + t)
    layers, n = 3, 3
    conv = torch.randn(layers, R, C, K - 1, generator=gen).to(DEVICE)
    stash = torch.randn(layers, n * t + 4, C, generator=gen).to(DEVICE, dtype)  # spare rows
    rows = torch.tensor([4, 1, 2], dtype=torch.int32, device=DEVICE)
    fresh = torch.tensor([0, 1, 0], dtype=torch.int32, device=DEVICE)
    keep = torch.tensor([t, 1, max(1, t - 1)], dtype=torch.int32, device=DEVICE)

    r64 = rows.long()
    window = conv[:, r64] * (fresh == 0).float()[None, :, None, None]
    x = stash[:, :n * t].view(layers, n, t, C).transpose(2, 3).float()
    seq = torch.cat([window, x], dim=3)
    idx = keep.long()[:, None] + torch.arange(K - 1, device=DEVICE)
    expect = conv.clone()
    expect[:, r64] = seq.gather(3, idx[None, :, None, :].expand(layers, n, C, K - 1))

    commit_windows(conv, stash, rows, fresh, keep, t)
    assert torch.equal(conv, expect)
