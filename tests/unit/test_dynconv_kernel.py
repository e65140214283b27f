"""DFlash2's dynamic conv in Triton (kernels/dynconv.py) and the drafter's use of it.

The kernel is compared with DynamicConv.apply(y, coefficients(x), side) over a shape sweep (on
CPU tensors it runs in Triton's interpreter: tests/conftest.py sets TRITON_INTERPRET=1 without
CUDA). The drafter's torch path must equal the pre-kernel layer code (written out below as
`reference_forward`) bit for bit; the kernel path, forced on for CPU tensors by patching the
kernel dispatch, must match it within rounding.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
import torch.nn.functional as F

from specpilot.kernels.dynconv import dynamic_conv
from specpilot.layers import norm as layers_norm
from specpilot.models.loader import build_model
from specpilot.spec import drafter as drafter_mod
from specpilot.spec.draft_loader import load_drafter
from specpilot.spec.drafter import DynamicConv
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import make_tiny

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# (tests marked `interpreter` put CPU tensors through Triton; on a GPU machine the drafter reaches
# the kernel through its normal CUDA dispatch instead)
# 16-bit: about two ulp. The kernel rounds where torch rounds (fp32 and fp16 came out bit-equal
# in the interpreter), but the interpreter rounds fp32 -> bf16 by truncation, so bf16 on CPU gets
# a few truncations of the products' size (|c * y| up to ~10 here) as absolute error
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2) if torch.cuda.is_available()
       else dict(rtol=4e-2, atol=0.125)}


def make_conv(h, k, group_size, dtype, seed=0):
    conv = DynamicConv(h, k, group_size)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        conv.base_kernel.copy_(torch.randn(conv.base_kernel.shape, generator=g) * 0.5)
        w = conv.kernel_projection.weight
        w.copy_(torch.randn(w.shape, generator=g) * h ** -0.5)
    return conv.to(DEVICE, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("r", [1, 3])
@pytest.mark.parametrize("bd", [1, 5, 16])
@pytest.mark.parametrize("h, group_size",  # group sizes that divide the width
                         [(h, gs) for h in (64, 96, 130) for gs in (1, 16) if h % gs == 0])
@pytest.mark.parametrize("k", [2, 3])
def test_kernel_matches_torch(dtype, r, bd, h, k, group_size):
    conv = make_conv(h, k, group_size, dtype)
    g = torch.Generator().manual_seed(r * 1000 + bd * 10 + k)
    x = torch.randn(r, bd, h, generator=g).to(DEVICE, dtype)
    y = torch.randn(r, bd, h, generator=g).to(DEVICE, dtype)
    with torch.no_grad():
        coeff = conv.coefficients(x)
        delta = conv.kernel_projection(x).view(r, bd, 2, k, h // group_size)
        # block_h 32: several channel blocks, the last one partial (H = 130); None: the default
        for side, block_h in ((0, None), (1, 32)):
            ref = conv.apply(y, coeff, side)
            out = dynamic_conv(y, delta, conv.base_kernel, side, group_size, block_h)
            assert out.dtype == ref.dtype and out.shape == ref.shape
            torch.testing.assert_close(out, ref, **TOL[dtype])
            if not torch.cuda.is_available() and dtype != torch.bfloat16:
                assert torch.equal(out, ref)  # same rounding steps (see TOL)


def test_kernel_rejects_bad_shapes():
    conv = make_conv(64, 2, 16, torch.float32)
    y = torch.zeros(1, 4, 64, device=DEVICE)
    with pytest.raises(ValueError):
        dynamic_conv(y, torch.zeros(1, 4, 2, 2, 8, device=DEVICE), conv.base_kernel, 0, 16)
    with pytest.raises(ValueError):
        dynamic_conv(y, torch.zeros(1, 4, 2, 2, 4, device=DEVICE), conv.base_kernel, 0, 12)


# ---- the drafter: torch path unchanged, kernel path within rounding ---------------------------

class BlockOnlyAttention:
    """A stand-in draft attention backend: each request's block attends to itself only."""

    def __init__(self, block_len):
        self.b = block_len

    def attend(self, q, k, v, layer_id, scale, causal, window):
        n, hq, d = q.shape
        q, k, v = (t.view(n // self.b, self.b, -1, d).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=causal,
                                           enable_gqa=True)
        return o.transpose(1, 2).reshape(n, hq, d)


def reference_forward(drafter, block_ids, positions, backend):
    """BlockDrafter.forward as written before the kernel: separate residual adds, coefficients
    materialised, apply() per side."""
    x = drafter._target[0](block_ids) * drafter.dc.input_embedding_scale
    r, b, h = x.shape
    flat_pos = positions.reshape(-1)
    for layer in drafter.layers:
        def attn(y, layer=layer):
            out = layer.self_attn(y.reshape(r * b, h), flat_pos, backend, layer.layer_id,
                                  layer.causal, layer.window)
            return out.view(r, b, h)

        for norm, fn, conv in ((layer.input_layernorm, attn, layer.attention_conv),
                               (layer.post_attention_layernorm, layer.mlp, layer.mlp_conv)):
            y = norm(x)
            coeff = conv.coefficients(y)
            x = x + conv.apply(fn(conv.apply(y, coeff, 0)), coeff, 1)
    return drafter.norm(x)


@pytest.fixture(scope="module")
def drafters(tmp_path_factory):
    """get(kind, dtype) -> (drafter on CPU, block ids [3, 8], positions [3, 8]); kind "k2": the
    tiny DFlash2 checkpoint (K = 2, group size 16), "k3": K = 3, group size 1, random weights."""
    root = tmp_path_factory.mktemp("dynconv")
    tiny = make_tiny("qwen3", root / "t")
    paths = {"k2": make_drafter("dflash2", root / "k2", block_size=8)}
    paths["k3"] = make_drafter("dflash2", root / "k3", block_size=8)
    cfg = json.load(open(os.path.join(paths["k3"], "config.json")))
    cfg["dflash_config"].update(conv_kernel_size=3, conv_group_size=1)
    json.dump(cfg, open(os.path.join(paths["k3"], "config.json"), "w"))
    cache = {}

    def get(kind, dtype):
        if (kind, dtype) not in cache:
            cpu = torch.device("cpu")
            target, _ = build_model(tiny, dtype, cpu, 600)
            d = load_drafter(paths[kind], target, dtype, cpu, 600,
                             "dummy" if kind == "k3" else "auto")
            g = torch.Generator().manual_seed(5)
            with torch.no_grad():
                for name, p in d.named_parameters():
                    if kind == "k3" and "conv" in name:
                        p.copy_(torch.randn(p.shape, generator=g) * (0.3 if p.dim() == 3 else 0.1))
            ids = torch.randint(0, 255, (3, 8), generator=g)
            pos = torch.arange(8)[None, :] + torch.tensor([[5], [11], [0]])
            cache[kind, dtype] = (d, ids, pos)  # d holds the target's embedding and head
        return cache[kind, dtype]
    return get


@pytest.mark.parametrize("kind", ["k2", "k3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_drafter_torch_path_unchanged(monkeypatch, drafters, kind, dtype):
    monkeypatch.setattr(layers_norm, "USE_TRITON", False)
    d, ids, pos = drafters(kind, dtype)
    backend = BlockOnlyAttention(ids.shape[1])
    with torch.no_grad():
        assert torch.equal(d(ids, pos, backend), reference_forward(d, ids, pos, backend))


@pytest.mark.interpreter  # fp16, not bf16: the interpreter's truncating bf16 casts drift (norms too)
@pytest.mark.parametrize("kind", ["k2", "k3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_drafter_kernel_path(monkeypatch, drafters, kind, dtype):
    calls = []

    def dispatch(x, name="norm"):  # dynconv and the norms (fused adds) take Triton on CPU
        calls.append(name)
        return layers_norm._kernel_module(name)

    monkeypatch.setattr(layers_norm, "triton_kernels", dispatch)
    monkeypatch.setattr(drafter_mod, "triton_kernels", dispatch)
    d, ids, pos = drafters(kind, dtype)
    backend = BlockOnlyAttention(ids.shape[1])
    with torch.no_grad():
        out = d(ids, pos, backend)
        monkeypatch.undo()
        ref = reference_forward(d, ids, pos, backend)
    assert calls.count("dynconv") == 2 * len(d.layers)
    torch.testing.assert_close(out, ref, **TOL[dtype])
