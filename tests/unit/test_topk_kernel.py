"""The head top-k in two Triton launches (specpilot/kernels/topk.py) against torch: the values
and ids of logits.float() * multiplier (then softcap * tanh(. / softcap)).topk, ties by the
smaller id. Without CUDA the kernels run in Triton's interpreter on CPU tensors
(tests/conftest.py)."""

from __future__ import annotations

import pytest
import torch

from specpilot.kernels.topk import topk_rows

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def reference(x, k, mult, cap):
    z = x.float() * mult
    if cap is not None:
        z = cap * torch.tanh(z / cap)
    # ties by the smaller id: a stable sort on descending value
    order = torch.sort(z, dim=-1, descending=True, stable=True)
    return order.values[:, :k], order.indices[:, :k]


@pytest.mark.parametrize("r,v,k,chunk,dtype,mult,cap", [
    (3, 1000, 16, 256, torch.bfloat16, 1.0, None),   # 4 chunks, the last one partial
    (2, 300, 5, 64, torch.float32, 0.25, None),      # k not a power of two
    (4, 777, 16, 128, torch.bfloat16, 0.2, 20.0),    # Muse-Glimmer's multiplier and softcap
    (1, 16, 16, 16, torch.float16, 1.0, None),       # k = V: every entry
])
def test_topk_rows_matches_torch(r, v, k, chunk, dtype, mult, cap):
    torch.manual_seed(r * v + k)
    wide = (torch.randn(r, v + 3) * 4).to(dtype)
    x = wide[:, 1:1 + v].to(DEV)  # strided rows
    x[0, 5:25] = x[0, 5]  # a run of ties across a top-k boundary
    vals, ids = topk_rows(x, k, mult, cap, chunk=chunk)
    want_v, want_i = reference(x.cpu(), k, mult, cap)
    assert vals.dtype == torch.float32 and ids.dtype == torch.int64
    assert torch.equal(ids.cpu(), want_i)
    if cap is None:
        assert torch.equal(vals.cpu(), want_v)  # the same fp32 product
    else:  # tanh through exp: a few ulps from torch's
        torch.testing.assert_close(vals.cpu(), want_v, rtol=1e-5, atol=1e-5)


def test_topk_rows_errors_and_empty():
    x = torch.randn(2, 50, device=DEV)
    with pytest.raises(ValueError, match="k = 0"):
        topk_rows(x, 0)
    with pytest.raises(ValueError, match="k = 51"):
        topk_rows(x, 51)
    with pytest.raises(ValueError, match="contiguous last dim"):
        topk_rows(x.t(), 4)
    with pytest.raises(ValueError, match="softcap"):
        topk_rows(x, 4, softcap=0.0)
    vals, ids = topk_rows(x[:0], 4)
    assert vals.shape == (0, 4) and ids.shape == (0, 4)


@pytest.mark.parametrize("cap", [None, 20.0])
def test_topk_rows_nan_ranks_as_minus_inf(cap):
    """NaN logits (a broken layer upstream) rank as -inf: every id is a real token id. Before,
    a row of NaNs gave the "no index" sentinel 2^31 - 1 as its ids, which the drafter's gathers
    then read out of range."""
    torch.manual_seed(5)
    x = torch.randn(3, 300, device=DEV)
    x[0, 10:200] = float("nan")   # some NaNs, across chunks
    x[1] = float("nan")           # a row of NaNs
    x[2, 299] = float("nan")      # in the last, partial chunk
    vals, ids = topk_rows(x, 8, 0.5, cap, chunk=64)
    want_v, want_i = reference(torch.nan_to_num(x.cpu(), nan=float("-inf")), 8, 0.5, cap)
    assert torch.equal(ids.cpu(), want_i)
    assert ids.min() >= 0 and ids.max() < 300
    assert ids[1].tolist() == list(range(8))   # all -inf: the smallest ids, in order
    assert torch.equal(vals[1].cpu(), torch.full((8,), float("-inf")))
    torch.testing.assert_close(vals[[0, 2]].cpu(), want_v[[0, 2]], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cap", [None, 20.0])
def test_drafter_head_topk_kernel_path(monkeypatch, cap):
    """BlockDrafter.head_topk on the Triton path (forced here, as on CUDA) == torch's topk of
    BlockDrafter.logits: the same ids, the values to a few ulps."""
    from types import SimpleNamespace

    from specpilot.kernels import topk as topk_module
    from specpilot.spec import drafter as drafter_module

    torch.manual_seed(3)
    lin = torch.nn.Linear(12, 700, bias=False).to(DEV)
    ns = SimpleNamespace(_target=[None, lin],
                         dc=SimpleNamespace(output_multiplier=0.5, final_logit_softcapping=cap))
    ns._scaled = lambda z: drafter_module.BlockDrafter._scaled(ns, z)
    hidden = torch.randn(2, 3, 12, device=DEV)
    with torch.no_grad():
        want_v, want_i = drafter_module.BlockDrafter.logits(ns, hidden).topk(16, dim=-1)
        monkeypatch.setattr(drafter_module, "triton_kernels", lambda x, name: topk_module)
        vals, ids = drafter_module.BlockDrafter.head_topk(ns, hidden, 16)
    assert ids.shape == (2, 3, 16) and torch.equal(ids, want_i)
    torch.testing.assert_close(vals, want_v, rtol=1e-5, atol=1e-5)
