"""The drafter's inference layout (spec/drafter.py docstring): q | kv and gate_up per layer, one
all-layer context K/V GEMM, equal to the checkpoint's separate linears and with no weight stored
twice; layers/fused.py's fuse_rows / RowSlice on their own."""

import pytest
import torch
from torch import nn

from specpilot.engine.kv_cache import KVCache, ReqToTokenTable
from specpilot.layers.fused import RowSlice, fuse_rows
from specpilot.models.loader import build_model
from specpilot.spec.draft_attention import DraftAttentionBackend
from specpilot.spec.draft_loader import load_drafter
from specpilot.spec.drafter import BlockDrafter
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import make_tiny

CTX, BD = [5, 9], 4  # two requests: context lengths, block rows


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    model, _ = build_model(make_tiny("qwen3", tmp_path_factory.mktemp("t")), torch.float32,
                           torch.device("cpu"), 600)
    return model


def load(path, target, dtype=torch.float32, **kw):
    return load_drafter(str(path), target, dtype, torch.device("cpu"), 600, **kw)


def load_unfused(path, target, monkeypatch, dtype=torch.float32):
    with monkeypatch.context() as m:
        m.setattr(BlockDrafter, "fuse", lambda self, context_kv=True: None)
        return load(path, target, dtype)


def linears(d: nn.Module) -> set[str]:
    return {n for n, m in d.named_modules() if type(m) is nn.Linear}


def run_step(d: BlockDrafter):
    """Store context rows of two requests, then a block pass over them: (hidden, K, V) with K/V
    the stored context [layers, N, Hkv, D]."""
    g = torch.Generator().manual_seed(7)
    c, attn = d.dc.hf, d.layers[0].self_attn
    n = sum(CTX)
    dtype = d.norm.weight.dtype
    kv = KVCache(c.num_hidden_layers, n + 1, attn.num_kv_heads, attn.head_dim, dtype,
                 torch.device("cpu"))
    table = ReqToTokenTable(2, 64, torch.device("cpu"))
    rows = torch.cat([torch.full((k,), r) for r, k in enumerate(CTX)])
    positions = torch.cat([torch.arange(k) for k in CTX])
    loc = torch.arange(1, n + 1)
    table.write(rows, positions, loc)
    backend = DraftAttentionBackend(kv, table)
    feats = torch.randn(n, d.fc.in_features, generator=g).to(dtype)
    d.store_context(feats, positions, backend.prepare_context(loc))
    ids = torch.randint(0, c.vocab_size - 1, (len(CTX), BD), generator=g)
    ids[:, 1:] = d.dc.mask_token_id
    pos = torch.tensor(CTX)[:, None] + torch.arange(BD)
    with torch.inference_mode():
        hidden = d(ids, pos, backend.prepare_block([0, 1], CTX, BD))
    return hidden, torch.stack([k[loc] for k in kv.k]), torch.stack([v[loc] for v in kv.v])


@pytest.mark.parametrize("kind", ["dflash", "dflash2", "dspark"])
def test_fused_equals_unfused(tmp_path, target, monkeypatch, kind):
    path = make_drafter(kind, tmp_path, layers=3)
    ref, fused = load_unfused(path, target, monkeypatch), load(path, target)
    out_ref, out = run_step(ref), run_step(fused)
    for a, b in zip(out, out_ref):  # equal in practice (same K order per output), tolerance: BLAS
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    # fewer GEMMs: per layer q, o, gate_up, down (+ the convs'), one context K/V for all layers
    per_layer = {"self_attn.q_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"}
    if kind == "dflash2":
        per_layer |= {"attention_conv.kernel_projection", "mlp_conv.kernel_projection"}
    heads = {n for n in linears(ref) if not n.startswith("layers.")}
    assert linears(fused) == heads | {"context_kv_proj"} | {
        f"layers.{i}.{n}" for i in range(3) for n in per_layer}
    assert len(linears(ref)) - len(linears(fused)) == 3 * 3 - 1  # k, v, up per layer; + context
    assert fused.context_kv_proj.weight.shape == (3 * 2 * 2 * 16, 64)  # L * 2 * Hkv * D rows


def test_no_weight_stored_twice(tmp_path, target, monkeypatch):
    path = make_drafter("dflash2", tmp_path)
    ref, fused = load_unfused(path, target, monkeypatch), load(path, target)
    params = list(fused.parameters())
    storages = [p.untyped_storage() for p in params]
    assert len({s.data_ptr() for s in storages}) == len(params)
    assert sum(s.nbytes() for s in storages) == sum(p.numel() * 4 for p in ref.parameters())
    assert sum(p.numel() for p in params) == sum(p.numel() for p in ref.parameters())
    for i, layer in enumerate(fused.layers):
        kv = layer.self_attn.kv_proj
        assert isinstance(kv, RowSlice) and not list(kv.parameters())
        assert (kv.start, kv.stop) == (i * 64, (i + 1) * 64)  # [k_i; v_i]: 2 * Hkv * D rows
        # the layer's k_proj rows, as loaded, sit in the shared weight
        assert torch.equal(fused.context_kv_proj.weight[kv.start:kv.start + 32],
                           ref.layers[i].self_attn.k_proj.weight)


def test_dummy_load_and_context_fusion_off(tmp_path, target):
    path = make_drafter("dflash", tmp_path)
    d = load(path, target, load_format="dummy")
    assert "context_kv_proj" in d._modules and "gate_up_proj" in d.layers[0].mlp._modules
    d = load(path, target, fuse_context_kv=False)  # W12: each layer keeps its own [k; v] GEMM
    assert "context_kv_proj" not in d._modules
    assert type(d.layers[0].self_attn.kv_proj) is nn.Linear
    assert not hasattr(d.layers[0].self_attn, "k_proj") and not hasattr(d.layers[0].mlp, "up_proj")
    d.fuse()  # fusing a fused drafter again only adds the context GEMM
    assert isinstance(d.layers[1].self_attn.kv_proj, RowSlice)


def test_training_drafter_stays_unfused(tmp_path, target):
    from specpilot.models.loader import instantiate
    from specpilot.spec.draft_config import DraftConfig

    dc = DraftConfig.from_path(make_drafter("dflash", tmp_path), 3, 256)
    d = instantiate(lambda: BlockDrafter(dc, 64, 64), torch.float32, torch.device("cpu"))
    attn = d.layers[0].self_attn
    assert {"q_proj", "k_proj", "v_proj"} <= set(attn._modules) and "kv_proj" not in attn._modules


def test_w12_keeps_per_layer_context_kv(tmp_path, monkeypatch):
    """--weight-format w12: the loader skips the all-layer context GEMM (stock_worker passes
    fuse_context_kv=False), the rest converts and runs; converting a context-fused drafter would
    leave RowSlices over a W12 layer, which refuse to run rather than use stale bf16 rows."""
    from specpilot.w12.linear import W12Linear, convert_model_linears

    bf16 = torch.bfloat16
    target, _ = build_model(make_tiny("qwen3", tmp_path / "t"), bf16, torch.device("cpu"), 600)
    path = make_drafter("dflash2", tmp_path / "d")
    ref = run_step(load_unfused(path, target, monkeypatch, bf16))
    d = load(path, target, bf16, fuse_context_kv=False)
    convert_model_linears(d)
    assert isinstance(d.layers[0].self_attn.kv_proj, W12Linear)
    for a, b in zip(run_step(d), ref):
        assert torch.allclose(a.float(), b.float(), rtol=2e-2, atol=2e-2)
    d = load(path, target, bf16)
    convert_model_linears(d)
    assert isinstance(d.context_kv_proj, W12Linear)
    with pytest.raises(TypeError, match="RowSlice of context_kv_proj"):
        run_step(d)


class Owner(nn.Module):
    def __init__(self, bias):
        super().__init__()
        self.parts = nn.ModuleList(nn.Linear(8, n, bias=bias) for n in (6, 4))


@pytest.mark.parametrize("bias", [False, True])
def test_fuse_rows(bias):
    torch.manual_seed(0)
    m, x = Owner(bias), torch.randn(3, 8)
    ref = [p(x) for p in m.parts]
    fused = fuse_rows(m, "all", [(m.parts, "0"), (m.parts, "1")])
    assert fused is m.all and fused.weight.shape == (10, 8) and not list(m.parts.parameters())
    assert [tuple(m.parts[i](x).shape) for i in (0, 1)] == [(3, 6), (3, 4)]
    assert all(torch.allclose(m.parts[i](x), ref[i], rtol=0, atol=1e-6) for i in (0, 1))
    assert torch.allclose(fused(x), torch.cat(ref, -1), rtol=0, atol=1e-6)


def test_row_slice_refuses_a_replaced_owner():
    m = Owner(False)
    fuse_rows(m, "all", [(m.parts, "0"), (m.parts, "1")])
    m.all = nn.Identity()  # e.g. convert_model_linears turning it into a W12Linear
    with pytest.raises(TypeError, match="RowSlice of all needs an nn.Linear"):
        m.parts[0](torch.randn(2, 8))
    with pytest.raises(TypeError, match="plain nn.Linear"):
        fuse_rows(m, "again", [(m.parts, "0")])
