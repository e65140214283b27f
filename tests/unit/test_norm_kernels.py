"""Triton norm / silu_mul kernels (specpilot/kernels/norm.py) against the torch modules of
specpilot/layers/norm.py and GatedMLP's torch expression.

Without CUDA the kernels run in Triton's interpreter on CPU tensors (tests/conftest.py sets
TRITON_INTERPRET=1 before triton is imported); the wrappers are called directly, since the modules
dispatch to them only on CUDA. bf16 runs on CUDA only (the interpreter does not support it).

Exact equality is not expected: the kernel sums the squares of a row in another order than torch,
so the fp32 rms differs in the last bits; fp32 outputs agree to ~1e-6 relative, and 16-bit ones,
rounded from those, now and then land one ulp apart (two roundings: normed, then times weight).
"""

from __future__ import annotations

import pytest
import torch

from specpilot.kernels import norm as K
from specpilot.layers import norm as layers_norm
from specpilot.layers.norm import GatedRMSNorm, RMSNorm, ZeroCenteredRMSNorm

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"

DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if CUDA else [])
SHAPES = [(1, 48), (5, 100), (3, 256)]  # (rows, D): odd widths, 1-5 rows
EPS = 1e-6


@pytest.fixture(autouse=True)
def _torch_modules(monkeypatch):
    monkeypatch.setattr(layers_norm, "USE_TRITON", False)  # references run the torch code


def tol(dtype: torch.dtype) -> dict:
    if dtype == torch.float32:
        return dict(rtol=2e-6, atol=1e-6)
    return dict(rtol=2 * torch.finfo(dtype).eps, atol=1e-5)  # ~one ulp of each of two roundings


def rand(*shape, dtype, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype=dtype, device=DEV)


def make_norm(cls, dim, dtype, seed):
    m = cls(dim, EPS).to(device=DEV)
    with torch.no_grad():
        m.weight.copy_(rand(dim, dtype=torch.float32, seed=seed, scale=0.5) + 1.0)
    return m.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,dim", SHAPES)
@pytest.mark.parametrize("zero_centred", [False, True])
@pytest.mark.parametrize("with_residual", [False, True])
def test_rms_norm(dtype, rows, dim, zero_centred, with_residual):
    m = make_norm(ZeroCenteredRMSNorm if zero_centred else RMSNorm, dim, dtype, seed=dim)
    x = rand(rows, dim, dtype=dtype, seed=1, scale=3.0)
    with torch.no_grad():
        if with_residual:
            res = rand(rows, dim, dtype=dtype, seed=2)
            out, h = K.rms_norm(x, m.weight, EPS, zero_centred, residual=res)
            assert torch.equal(h, x + res)  # the add rounds exactly like torch's
            ref = m(x + res)
        else:
            out, ref = K.rms_norm(x, m.weight, EPS, zero_centred), m(x)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    torch.testing.assert_close(out, ref, **tol(dtype))


def test_rms_norm_fp32_weight_16bit_input():
    """Plain style with an fp32 weight: the output is fp32 (torch's type promotion)."""
    m = make_norm(RMSNorm, 100, torch.float32, seed=3)
    x = rand(4, 100, dtype=torch.float16, seed=4)
    with torch.no_grad():
        out, ref = K.rms_norm(x, m.weight, EPS), m(x)
    assert out.dtype == ref.dtype == torch.float32
    torch.testing.assert_close(out, ref, **tol(torch.float32))


@pytest.mark.parametrize("zero_centred", [False, True])
def test_rms_norm_strided_heads(zero_centred):
    """q / k heads [T, H, D] viewed out of a fused qkv output: read in place, not copied."""
    t, heads, dim = 3, 4, 48
    qkv = rand(t, heads * dim + 40, dtype=torch.float32, seed=5)
    q = qkv[:, :heads * dim].view(t, heads, dim)
    m = make_norm(ZeroCenteredRMSNorm if zero_centred else RMSNorm, dim, torch.float32, seed=6)
    with torch.no_grad():
        out = K.rms_norm(q, m.weight, EPS, zero_centred)
        torch.testing.assert_close(out, m(q), **tol(torch.float32))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,dim", SHAPES)
def test_gated_rms_norm(dtype, rows, dim):
    m = make_norm(GatedRMSNorm, dim, dtype, seed=7)
    x = rand(rows, dim, dtype=dtype, seed=8, scale=2.0)
    gate = rand(rows, dim, dtype=dtype, seed=9, scale=3.0)
    with torch.no_grad():
        out, ref = K.gated_rms_norm(x, gate, m.weight, EPS), m(x, gate)
    assert out.dtype == ref.dtype
    torch.testing.assert_close(out, ref, **tol(dtype))


def test_gated_rms_norm_strided_gate_heads():
    """Gated DeltaNet's output norm: x [T, H, D] contiguous, the gate z [T, H, D] a view of a
    fused projection's columns (row stride wider than H * D), read in place. Equal to the torch
    module on the same views, and bit-identical to the kernel on a contiguous copy of z."""
    t, heads, dim = 3, 4, 48
    m = make_norm(GatedRMSNorm, dim, torch.float32, seed=10)
    x = rand(t, heads, dim, dtype=torch.float32, seed=11, scale=2.0)
    proj = rand(t, 30 + heads * dim + 7, dtype=torch.float32, seed=12, scale=3.0)
    z = proj[:, 30:30 + heads * dim].reshape(t, heads, dim)
    assert z.data_ptr() == proj[:, 30:].data_ptr()  # a view, not a copy
    with torch.no_grad():
        out = K.gated_rms_norm(x, z, m.weight, EPS)
        torch.testing.assert_close(out, m(x, z), **tol(torch.float32))
        assert torch.equal(out, K.gated_rms_norm(x, z.contiguous(), m.weight, EPS))
    assert out.shape == (t, heads, dim)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lead,n", [((3,), 100), ((2, 3), 1500)])  # 1500: two column tiles
def test_silu_mul_split_views(dtype, lead, n):
    """gate / up are the two halves of one fused gate_up output (strided rows)."""
    gate_up = rand(*lead, 2 * n, dtype=dtype, seed=n, scale=4.0)
    gate, up = gate_up.split([n, n], dim=-1)
    assert not gate.is_contiguous()
    out = K.silu_mul(gate, up)
    ref = torch.nn.functional.silu(gate) * up
    assert out.dtype == ref.dtype and out.shape == ref.shape
    torch.testing.assert_close(out, ref, **tol(dtype))
