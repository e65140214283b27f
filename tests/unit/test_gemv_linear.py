"""layers/linear.py: bf16 linear layers whose one-row CUDA forward is our GEMV (bf16_gemv).

On CPU the GEMV runs in the Triton interpreter (tests/conftest.py sets TRITON_INTERPRET=1), so
the dispatch is checked with ``_gemv_device`` standing in for a CUDA input; the @gpu test runs
it on CUDA, eagerly and inside a captured graph."""
import os

import pytest
import torch
from torch import nn

from specpilot.layers import linear as L
from tests.unit.w12_data import acts, check_close, make_weight, replayed, same_bits

pytest.importorskip("triton")
from specpilot.w12 import gemv as G  # noqa: E402

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"


def _model():
    m = nn.Sequential(nn.Linear(64, 96, bias=True), nn.Linear(96, 64, bias=False),
                      nn.Linear(64, 32, dtype=torch.float32))
    m[0].to(torch.bfloat16)
    m[1].to(torch.bfloat16)
    head = nn.Linear(64, 200, bias=False, dtype=torch.bfloat16)
    m.add_module("head", head)
    emb = nn.Embedding(200, 64, dtype=torch.bfloat16)
    head.weight = emb.weight   # tied
    m.add_module("emb", emb)
    return m


def test_use_gemv_swaps_plain_bf16_linears_only():
    m = _model()
    params = {n: p for n, p in m.named_parameters(remove_duplicate=False)}
    assert L.use_gemv(m) == 3
    assert [type(x) for x in (m[0], m[1], m[2], m.head)] == [L.GemvLinear, L.GemvLinear,
                                                             nn.Linear, L.GemvLinear]
    assert all(p is params[n] for n, p in m.named_parameters(remove_duplicate=False))
    assert m.head.weight is m.emb.weight
    assert L.use_gemv(m) == 0   # already swapped
    assert not any(x.is_head for x in (m[0], m[1], m.head))   # no module named lm_head
    outer = nn.Module()
    outer.lm_head = nn.Linear(64, 200, bias=False, dtype=torch.bfloat16)
    outer.model = nn.Module()
    outer.model.lm_head_proj = nn.Linear(64, 64, dtype=torch.bfloat16)
    assert L.use_gemv(outer) == 2
    assert outer.lm_head.is_head and not outer.model.lm_head_proj.is_head


def test_gemv_linear_dispatch(monkeypatch):
    m = _model()
    L.use_gemv(m)
    lin = m[0]
    lin.weight.data = make_weight(96, 64, 3, n_edges=0)
    x1, x2 = acts(1, 64, 1), acts(2, 64, 2)
    # CPU input: F.linear at every M
    assert same_bits(lin(x1), nn.functional.linear(x1, lin.weight, lin.bias))
    if CUDA:   # the GEMV path on its own device
        lin, x1, x2 = lin.cuda(), x1.cuda(), x2.cuda()
    else:      # the interpreter runs it on CPU tensors
        monkeypatch.setattr(L, "_gemv_device", lambda x: True)
    calls, tunes = [], []
    real, real_cfg = G.bf16_gemv, G.bf16_gemv_config
    monkeypatch.setattr(G, "bf16_gemv", lambda x, w, config=None: calls.append(x.shape) or
                        real(x, w, config))
    monkeypatch.setattr(G, "bf16_gemv_config", lambda x, w: tunes.append(x.shape) or
                        real_cfg(x, w))
    linear = nn.functional.linear(x1, lin.weight, lin.bias)
    # eager: F.linear; the first call of the module tunes the GEMV's config for the capture
    for _ in range(2):
        assert same_bits(lin(x1), linear)
    assert calls == [] and tunes == [(1, 64)]
    # graph_twin: eager calls take the graph's path (the cost model's kernel profile), restored
    with L.graph_twin():
        with L.graph_twin():
            assert same_bits(lin(x1), real(x1, lin.weight) + lin.bias)
        assert same_bits(lin(x1), real(x1, lin.weight) + lin.bias)
    assert same_bits(lin(x1), linear) and calls == [(1, 64)] * 2
    calls.clear()
    # captured into a CUDA graph: the GEMV, one row with any leading shape
    monkeypatch.setattr(L, "_in_graph", lambda: True)
    y = lin(x1.view(1, 1, 64))
    assert calls == [(1, 64)] and y.shape == (1, 1, 96)
    assert same_bits(y.view(1, 96), real(x1, lin.weight) + lin.bias)
    check_close(real(x1, lin.weight), x1.cpu(), lin.weight.detach().cpu())
    assert same_bits(lin(x2), nn.functional.linear(x2, lin.weight, lin.bias))   # two rows
    with pytest.raises(RuntimeError):   # a wrong width reaches F.linear and its error
        lin(acts(2, 32, 3).to(x1.device))   # 64 values, but rows of 32
    monkeypatch.setattr(L, "FUSE_GEMV", False)
    assert same_bits(lin(x1), linear)
    assert calls == [(1, 64)]


def _fake(x, w):
    """A stand-in for our kernels that tells their path from F.linear's."""
    return nn.functional.linear(x, w) * 2


def _head_and_other(monkeypatch, head_bias: bool):
    """(lm_head, another layer), both GemvLinear of 64 -> 96 (the second with a bias), their
    forward taking our path on CPU tensors, Gluon taken as present."""
    from specpilot.w12 import mma

    m = nn.Module()
    m.lm_head = nn.Linear(64, 96, bias=head_bias, dtype=torch.bfloat16)
    m.other = nn.Linear(64, 96, bias=True, dtype=torch.bfloat16)
    L.use_gemv(m)
    monkeypatch.setattr(L, "_gemv_device", lambda x: True)
    monkeypatch.setattr(mma, "HAS_GLUON", True)
    return m.lm_head, m.other


def test_mma_head_dispatch(monkeypatch):
    """FUSE_MMA_HEAD: the lm_head's 2..mma.MAX_M rows run mma.bf16_mma in graphs (tuned at the
    module's first eager call per row count); other layers, one row (the GEMV), more rows and
    the flag off keep their paths."""
    from specpilot.w12 import mma

    head, other = _head_and_other(monkeypatch, head_bias=True)
    calls, tunes, gemv = [], [], []
    monkeypatch.setattr(mma, "bf16_mma", lambda x, w: calls.append(x.shape) or _fake(x, w))
    monkeypatch.setattr(mma, "tuned_config", lambda x, w: tunes.append(x.shape))
    monkeypatch.setattr(G, "bf16_gemv", lambda x, w: gemv.append(x.shape) or _fake(x, w))
    monkeypatch.setattr(G, "bf16_gemv_config", lambda x, w: None)
    monkeypatch.setattr(L, "FUSE_MMA_HEAD", True)
    x4, x16, x17 = acts(4, 64, 4), acts(16, 64, 16), acts(17, 64, 17)
    ref = lambda lin, x: nn.functional.linear(x, lin.weight, lin.bias)   # noqa: E731
    for _ in range(2):   # eager: F.linear, tuned once per row count
        assert same_bits(head(x4), ref(head, x4)) and same_bits(head(x16), ref(head, x16))
    assert tunes == [(4, 64), (16, 64)] and calls == []
    monkeypatch.setattr(L, "_in_graph", lambda: True)
    y = head(x4.view(2, 2, 64))
    assert y.shape == (2, 2, 96) and calls == [(4, 64)]
    assert same_bits(y.view(4, 96), _fake(x4, head.weight) + head.bias)
    assert same_bits(other(x4), ref(other, x4)) and calls == [(4, 64)]   # not the head
    assert same_bits(head(x17), ref(head, x17)) and calls == [(4, 64)]   # more rows: F.linear
    head(acts(1, 64, 1))
    assert gemv == [(1, 64)] and calls == [(4, 64)]                      # one row: the GEMV
    with pytest.raises(RuntimeError):   # a wrong width reaches F.linear and its error
        head(acts(8, 32, 3))   # 4 x 64 values, but rows of 32
    monkeypatch.setattr(L, "FUSE_MMA_HEAD", False)
    assert same_bits(head(x4), ref(head, x4)) and calls == [(4, 64)]


def test_wgmma_dispatch(monkeypatch):
    """FUSE_WGMMA: 2..wgmma.MAX_M rows of a non-head layer run wgmma.bf16_wgmma in graphs
    (tuned at the first eager call per row count) where wgmma.supported; the head's 2-16 rows
    stay on bf16_mma, one row on the GEMV, more rows, an unsupported device and the flag off on
    F.linear. Off by default."""
    from specpilot.w12 import mma, wgmma

    assert L.FUSE_WGMMA is (os.environ.get("SPECPILOT_BF16_WGMMA") == "1")
    head, other = _head_and_other(monkeypatch, head_bias=False)
    ok = {"dev": True}
    monkeypatch.setattr(wgmma, "supported", lambda M, K, device=None: ok["dev"] and 1 <= M
                        <= wgmma.MAX_M)
    calls, tunes, heads = [], [], []
    monkeypatch.setattr(wgmma, "bf16_wgmma", lambda x, w: calls.append(x.shape) or _fake(x, w))
    monkeypatch.setattr(wgmma, "tuned_config", lambda x, w: tunes.append(x.shape))
    monkeypatch.setattr(mma, "bf16_mma", lambda x, w: heads.append(x.shape) or _fake(x, w))
    monkeypatch.setattr(mma, "tuned_config", lambda x, w: None)
    monkeypatch.setattr(G, "bf16_gemv", _fake)
    monkeypatch.setattr(G, "bf16_gemv_config", lambda x, w: None)
    monkeypatch.setattr(L, "FUSE_WGMMA", True)
    monkeypatch.setattr(L, "FUSE_MMA_HEAD", True)
    x8, x40, x129 = acts(8, 64, 8), acts(40, 64, 40), acts(129, 64, 129)
    ref = lambda lin, x: nn.functional.linear(x, lin.weight, lin.bias)   # noqa: E731
    for _ in range(2):   # eager: F.linear, tuned once per row count
        assert same_bits(other(x8), ref(other, x8)) and same_bits(other(x40), ref(other, x40))
    assert tunes == [(8, 64), (40, 64)] and calls == []
    monkeypatch.setattr(L, "_in_graph", lambda: True)
    y = other(x40.view(4, 10, 64))
    assert y.shape == (4, 10, 96) and calls == [(40, 64)]
    assert same_bits(y.view(40, 96), _fake(x40, other.weight) + other.bias)
    head(x8)
    assert heads == [(8, 64)] and calls == [(40, 64)]            # the head's 8 rows: bf16_mma
    head(x40)
    assert calls == [(40, 64), (40, 64)]                         # its 40: bf16_wgmma
    assert same_bits(other(x129), ref(other, x129)) and len(calls) == 2   # past MAX_M
    ok["dev"] = False
    assert same_bits(other(x8), ref(other, x8)) and len(calls) == 2       # not sm_90
    ok["dev"] = True
    monkeypatch.setattr(L, "FUSE_WGMMA", False)
    assert same_bits(other(x8), ref(other, x8)) and len(calls) == 2


def test_gemv_wanted(monkeypatch):
    assert not L.gemv_wanted(torch.device("cpu"), torch.bfloat16)
    if CUDA:
        assert not L.gemv_wanted(torch.device("cuda"), torch.float32)
        monkeypatch.setenv("SPECPILOT_BF16_GEMV", "0")
        assert not L.gemv_wanted(torch.device("cuda"), torch.bfloat16)


@pytest.mark.gpu
def test_gpu_gemv_linear_eager_and_graph():
    lin = nn.Linear(2048, 1536, bias=True, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        lin.weight.copy_(make_weight(1536, 2048, 5, n_edges=0).cuda())
    L.use_gemv(lin)
    assert type(lin) is L.GemvLinear
    x = acts(1, 2048, 9).cuda()
    y = lin(x)   # eager: F.linear, and the GEMV's config tuned (the engine's warm-up)
    assert same_bits(y, nn.functional.linear(x, lin.weight, lin.bias))
    # captured: the GEMV with the config tuned above
    assert same_bits(replayed(lambda: lin(x)), G.bf16_gemv(x, lin.weight) + lin.bias)
    check_close(G.bf16_gemv(x, lin.weight), x.cpu(), lin.weight.detach().cpu())


@pytest.mark.gpu
def test_gpu_wgmma_graph(monkeypatch):
    """FUSE_WGMMA: a layer's 16 and 40 rows in a captured graph equal bf16_wgmma's bits at the
    config tuned by the eager call, and torch within tolerance."""
    from specpilot.w12 import wgmma

    if not wgmma.supported(40, 2048, "cuda"):
        pytest.skip("wgmma: compute capability 9.x with Gluon")
    monkeypatch.setattr(L, "FUSE_WGMMA", True)
    lin = nn.Linear(2048, 1536, bias=True, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        lin.weight.copy_(make_weight(1536, 2048, 7, n_edges=0).cuda())
    L.use_gemv(lin)
    for M in (16, 40):
        x = acts(M, 2048, 11 + M).cuda()
        assert same_bits(lin(x), nn.functional.linear(x, lin.weight, lin.bias))
        assert same_bits(replayed(lambda: lin(x)), wgmma.bf16_wgmma(x, lin.weight) + lin.bias)
        check_close(wgmma.bf16_wgmma(x, lin.weight), x.cpu(), lin.weight.detach().cpu())


@pytest.mark.gpu
def test_gpu_mma_head_graph(monkeypatch):
    """FUSE_MMA_HEAD: an lm_head's verify rows (8) in a captured graph equal bf16_mma's bits at
    the config tuned by the eager call, and torch within tolerance."""
    from specpilot.w12 import mma

    if not mma.bf16_mma_supported(8, 2048):
        pytest.skip("no Gluon")
    monkeypatch.setattr(L, "FUSE_MMA_HEAD", True)
    m = nn.Module()
    m.lm_head = nn.Linear(2048, 1536, bias=False, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        m.lm_head.weight.copy_(make_weight(1536, 2048, 6, n_edges=0).cuda())
    L.use_gemv(m)
    lin, x = m.lm_head, acts(8, 2048, 10).cuda()
    assert same_bits(lin(x), nn.functional.linear(x, lin.weight))
    assert same_bits(replayed(lambda: lin(x)), mma.bf16_mma(x, lin.weight))
    check_close(mma.bf16_mma(x, lin.weight), x.cpu(), lin.weight.detach().cpu())
