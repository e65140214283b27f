"""kernels/noise.seeded_noise_ against sampler's torch path (interpreter on CPU, see
tests/conftest.py): uniforms bit-identical, -log(u) within float rounding, only the given rows of
out written."""

from __future__ import annotations

import types

import pytest
import torch

pytest.importorskip("triton")

from specpilot.engine import sampler as S  # noqa: E402
from specpilot.kernels.noise import seeded_noise_  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
KEYS = [0, 1, 2**63 - 1, 0x9E3779B97F4A7C15, 2**64 - 1, 0xDEADBEEF12345678, 123456789]


def _torch_uniform(keys, n, offset):
    """The reference: sampler's torch path, on CPU."""
    return S._seeded_uniform_torch([S._row_hash(k) for k in keys], n, "cpu", offset)


def _info(keys, rows):
    return torch.tensor([[S._row_hash(k) for k in keys], rows], dtype=torch.int64, device=DEV)


def test_row_hash_matches_the_tensor_hash():
    halves = torch.tensor([[k & S._M32, k >> 32] for k in KEYS], dtype=torch.int64)
    ref = S._hash32(halves[:, 0] ^ S._hash32(halves[:, 1].clone())).tolist()
    assert [S._row_hash(k) for k in KEYS] == ref


@pytest.mark.parametrize("n", [37, 130])
@pytest.mark.parametrize("offset", [0, 15])
def test_uniform_is_bit_identical(n, offset):
    out = torch.empty(len(KEYS), n, device=DEV)
    seeded_noise_(out, _info(KEYS, list(range(len(KEYS)))), offset, exponential=False)
    assert torch.equal(out.cpu(), _torch_uniform(KEYS, n, offset))


@pytest.mark.parametrize("n", [37, 130])
@pytest.mark.parametrize("offset", [0, 15])
def test_exponential_writes_only_its_rows(n, offset):
    keys, rows = KEYS[:4], [5, 0, 3, 6]
    out = torch.full((8, n), -7.0, device=DEV)
    seeded_noise_(out, _info(keys, rows), offset, exponential=True)
    ref = _torch_uniform(keys, n, offset).log_().neg_()
    got = out.cpu()
    torch.testing.assert_close(got[rows], ref, rtol=1e-6, atol=0)
    others = [i for i in range(8) if i not in rows]
    assert (got[others] == -7.0).all()


def test_strided_out_and_large_offset():
    """A column slice of a wider tensor; counters past 2**32 wrap as the torch path's mask."""
    wide = torch.zeros(3, 100, device=DEV)
    out = wide[:, 10:60]
    offset = 2**32 - 20
    seeded_noise_(out, _info(KEYS[1:3], [2, 0]), offset, exponential=False)
    ref = _torch_uniform(KEYS[1:3], 50, offset)
    assert torch.equal(wide[[2, 0], 10:60].cpu(), ref)
    assert (wide[1] == 0).all() and (wide[:, :10] == 0).all() and (wide[:, 60:] == 0).all()


def test_sampler_routes_cuda_through_the_kernel(monkeypatch):
    """seeded_uniform(_) / seeded_exponential_ hand the kernel their rows; checked on CPU by
    routing every device to it (as layers.norm.triton_kernels routes CUDA)."""
    calls = []

    def kernel(out, info, offset, exponential):
        calls.append(exponential)
        return seeded_noise_(out, info, offset, exponential)

    monkeypatch.setattr(S, "triton_kernels",
                        lambda x, name: types.SimpleNamespace(seeded_noise_=kernel))
    e = torch.full((4, 37), -1.0, device=DEV)
    S.seeded_exponential_(e, [3, 1], KEYS[2:4], offset=5)
    assert calls == [True]
    torch.testing.assert_close(e[[3, 1]].cpu(), _torch_uniform(KEYS[2:4], 37, 5).log_().neg_(),
                               rtol=1e-6, atol=0)
    assert (e[[0, 2]] == -1.0).all()
    u = torch.zeros(4, 37, device=DEV)
    S.seeded_uniform_(u, [2], KEYS[:1], offset=5)
    assert torch.equal(u[2].cpu(), _torch_uniform(KEYS[:1], 37, 5)[0]) and calls == [True, False]
    assert torch.equal(S.seeded_uniform(KEYS, 37, DEV, 5).cpu(), _torch_uniform(KEYS, 37, 5))
    assert calls == [True, False, False]
    assert S.seeded_uniform([], 7, DEV).shape == (0, 7) and len(calls) == 3
