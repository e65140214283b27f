"""The L2 prefetch's host side (specpilot/kernels/prefetch.py): what it would issue, and its
refusals. The kernel itself is inline PTX the interpreter cannot run; it is compiled for sm_90 in
test_kernels_compile_sm90.py and timed by scripts/gpu_l2_prefetch_probe.py on a GPU."""
import pytest
import torch

from specpilot.kernels import prefetch as P


def test_row_plan_rounds_and_caps():
    w = torch.zeros(5120, 6144, dtype=torch.uint8)          # a W12 L plane
    assert P.row_plan(w, 1000) == (5120, 6144, 992)         # down to a multiple of 16
    assert P.row_plan(w, 10 ** 6, rows=100) == (100, 6144, 6144)   # capped at the row
    assert P.row_plan(w, 512, rows=10 ** 6) == (5120, 6144, 512)
    b = torch.zeros(64, 40, dtype=torch.bfloat16)
    assert P.row_plan(b, 64) == (64, 80, 64)                # strides in bytes
    assert P.row_plan(b, 100) == (64, 80, 80)
    assert P.row_plan(b[:, :24], 100) == (64, 80, 48)       # a column slice: its own length
    assert P.row_plan(w, 8)[2] == 0                          # nothing to issue
    with pytest.raises(ValueError, match="contiguous rows"):
        P.row_plan(w.t(), 16)
    with pytest.raises(ValueError, match="2-D"):
        P.row_plan(torch.zeros(16, dtype=torch.uint8), 16)
    with pytest.raises(ValueError, match="aligned"):
        P.row_plan(torch.zeros(4, 10, dtype=torch.uint8), 16)   # 10-byte rows


def test_head_plan():
    t = torch.zeros(3 * P.HEAD_CHUNK + 100, dtype=torch.uint8)
    assert P.head_plan(t, 10 ** 9) == (3, P.HEAD_CHUNK, 96)
    assert P.head_plan(t, P.HEAD_CHUNK) == (1, P.HEAD_CHUNK, 0)
    assert P.head_plan(torch.zeros(4, 8, dtype=torch.bfloat16), 40) == (0, P.HEAD_CHUNK, 32)
    with pytest.raises(ValueError, match="contiguous"):
        P.head_plan(torch.zeros(8, 8).t(), 16)


def test_refuses_cpu_tensors():
    with pytest.raises(ValueError, match="CUDA"):
        P.prefetch_rows(torch.zeros(16, 64, dtype=torch.uint8), 16)
    with pytest.raises(ValueError, match="CUDA"):
        P.prefetch_head(torch.zeros(64, dtype=torch.uint8), 16)


@pytest.mark.gpu
def test_gpu_prefetch_runs_and_changes_nothing():
    w = torch.randint(0, 255, (4096, 6144), dtype=torch.uint8, device="cuda")
    before = w.clone()
    P.prefetch_rows(w, 1024)
    P.prefetch_head(w, 5 << 20)
    P.prefetch_rows(w.view(torch.bfloat16), 4096, rows=100)
    torch.cuda.synchronize()
    assert torch.equal(w, before)


def test_parse_setting():
    assert P.parse_setting(None) is None and P.parse_setting("") is None
    assert P.parse_setting("off") is None and P.parse_setting(" 0 ") is None
    assert P.parse_setting("rows:1024") == ("rows", 1024)
    assert P.parse_setting("head:16") == ("head", 16 << 20)
    assert P.parse_setting("HEAD:0.5") == ("head", 1 << 19)
    for bad in ("rows", "rows:", "rows:-4", "tail:8", "head:x", "1024"):
        with pytest.raises(ValueError, match="expected"):
            P.parse_setting(bad)
    with pytest.raises(ValueError, match="mode"):
        P.weight_prefetcher(torch.zeros(4, 4), "tail", 16)


def test_linear_layers_prefetch_the_next_one_inside_graphs(monkeypatch):
    """record_order links our linear layers in call order (the last to the first); inside a
    graph (here its eager twin) with L2_PREFETCH on, each layer prefetches the next one's weight
    after its own GEMM: a bf16 GemvLinear its weight, a W12Linear its planes. Off, or outside a
    graph, nothing is issued."""
    from torch import nn

    from specpilot.layers import linear as L
    from specpilot.w12.linear import W12Linear

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.Linear(64, 32), nn.Linear(32, 16)).bfloat16()
    L.use_gemv(model)
    model[1] = W12Linear.from_linear(model[1])
    issued = []
    monkeypatch.setattr(P, "weight_prefetcher", lambda w, mode, amount: (
        lambda: issued.append((w, mode, amount))))
    x = torch.randn(1, 32).bfloat16()
    keys, n_modules = list(model.state_dict()), len(list(model.modules()))
    with L.record_order():
        model(x)
    mods = list(model)
    assert [m._l2_next for m in mods] == [mods[1], mods[2], mods[0]]
    # the links are no child modules (a cycle through the model)
    assert list(model.state_dict()) == keys and len(list(model.modules())) == n_modules
    with L.graph_twin():
        model(x)                              # setting off
    monkeypatch.setattr(L, "L2_PREFETCH", ("rows", 256))
    model(x)                                  # not in a graph
    assert issued == []
    with L.graph_twin():
        model(x)
    assert [mode for _, mode, _ in issued] == ["rows"] * 3 and issued[0][2] == 256
    planes, w2, w0 = (w for w, _, _ in issued)
    assert planes.L is mods[1].w12_L and planes.H is mods[1].w12_H
    assert w2 is mods[2].weight and w0 is mods[0].weight


@pytest.mark.gpu
def test_gpu_graph_with_prefetch_equals_without(monkeypatch):
    from torch import nn

    from specpilot.layers import linear as L

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.Linear(1024, 512)).bfloat16().cuda()
    L.use_gemv(model)
    x = torch.randn(1, 512, device="cuda").bfloat16()
    with L.record_order():
        model(x)
    outs = {}
    for setting in (None, ("rows", 256), ("head", 1 << 20)):
        monkeypatch.setattr(L, "L2_PREFETCH", setting)
        model(x)   # warm-up (the GEMV's config) before the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = model(x)
        graph.replay()
        torch.cuda.synchronize()
        outs[setting] = y.clone()
    first = outs[None]
    assert all(torch.equal(first, y) for y in outs.values())


def test_weight_prefetcher_launches(monkeypatch):
    """What each mode launches (base byte offset, rows, row stride, bytes per row), the kernel
    replaced by a recorder and the CUDA check lifted: bf16 rows = the heads of both K halves
    (our GEMVs walk K in split halves), W12 rows = both halves of L and the head of H, heads = the
    leading bytes in HEAD_CHUNK pieces (W12: 2/3 from L, 1/3 from H)."""
    from specpilot.w12 import encode
    from specpilot.w12 import kernel as K

    launched = []
    monkeypatch.setattr(P, "_check", lambda t: None)
    monkeypatch.setattr(P, "_launch", lambda base, n, stride, nbytes: launched.append(
        (base.data_ptr(), n, stride, nbytes)))
    w = torch.zeros(48, 640, dtype=torch.bfloat16)
    P.weight_prefetcher(w, "rows", 64)()
    assert launched == [(w.data_ptr(), 48, 1280, 64), (w.data_ptr() + 640, 48, 1280, 64)]
    launched.clear()
    monkeypatch.setattr(P, "HEAD_CHUNK", 4096)
    P.weight_prefetcher(w, "head", 10000)()
    assert launched == [(w.data_ptr(), 2, 4096, 4096), (w.data_ptr() + 8192, 1, 4096, 1808)]
    p = K.prepare(encode(torch.randn(48, 640).bfloat16()))
    launched.clear()
    P.weight_prefetcher(p, "rows", 128)()
    L0, H0 = p.L.data_ptr(), p.H.data_ptr()
    assert launched == [(L0, 48, p.Kp, 64), (L0 + p.Kp // 2, 48, p.Kp, 64), (H0, 48, p.Kp // 2, 64)]
    launched.clear()
    P.weight_prefetcher(p, "head", 3 * 4096)()
    assert launched == [(L0, 2, 4096, 4096), (H0, 1, 4096, 4096)]
