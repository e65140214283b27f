"""layers/fused.py: fused projections equal their parts, and fusing happens at load time."""

import torch
from torch import nn

from specpilot.layers.fused import fuse_projections, project


class Two(nn.Module):
    FUSED = {"ab": ("a", "b")}

    def __init__(self, bias: bool):
        super().__init__()
        self.a = nn.Linear(8, 5, bias=bias)
        self.b = nn.Linear(8, 3, bias=bias)


def test_fused_equals_parts():
    torch.manual_seed(0)
    for bias in (False, True):
        m = Two(bias)
        x = torch.randn(4, 8)
        ref = (m.a(x), m.b(x))
        assert fuse_projections(m) == 1 and fuse_projections(m) == 0  # idempotent
        assert type(m.ab) is nn.Linear and not hasattr(m, "a") and m.fused_sizes == {"ab": [5, 3]}
        out = project(m, "ab", x)
        assert len(out) == 2 and all(torch.allclose(o, r, atol=1e-6) for o, r in zip(out, ref))


def test_unfused_module_still_works():
    m = Two(False)
    x = torch.randn(2, 8)
    a, b = project(m, "ab", x)
    assert torch.equal(a, m.a(x)) and torch.equal(b, m.b(x))


def test_models_are_fused_at_load(tmp_path):
    from specpilot.models.loader import build_model
    from tests.e2e.tiny_models import make_tiny

    model, _ = build_model(make_tiny("llama", tmp_path / "t"), torch.float32, torch.device("cpu"),
                           64)
    layer = model.model.layers[0]
    assert layer.self_attn.qkv_proj.out_features == sum(layer.self_attn.fused_sizes["qkv_proj"])
    assert not hasattr(layer.self_attn, "q_proj") and "gate_up_proj" in layer.mlp.fused_sizes


def test_replaced_parts_are_freed_as_fusing_goes(monkeypatch):
    """Each group's parts are freed once it is fused, not at the end: holding every replaced
    part alive made the peak the model's fused groups twice over (Qwen3.8-27B in bf16 ran out
    of an H100's 80 GB while fusing). When a group is fused, no earlier group's part is alive."""
    import weakref

    from specpilot.layers import fused

    model = nn.Sequential(*(Two(False) for _ in range(4)))
    refs, alive_at_fuse = [], []
    real = fused.fused_linear

    def spy(parts):
        alive_at_fuse.append(sum(r() is not None for r in refs))
        refs.extend(weakref.ref(p) for p in parts)
        return real(parts)

    monkeypatch.setattr(fused, "fused_linear", spy)
    assert fuse_projections(model) == 4
    assert alive_at_fuse == [0, 0, 0, 0]
    assert all(r() is None for r in refs)
