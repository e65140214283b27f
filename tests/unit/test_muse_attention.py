"""MuseAttention's q / k front end: with fused projections one qk_norm call covers q and k (a
[T, Hq + Hkv, D] view of the fused output) and the query gain rides in the RoPE launch
(q_scale); unfused modules norm q and k separately. Either way the attention inputs and the
output must equal the former code (separate norms, q * qk_scale_factor, then RoPE) bit for bit,
on the torch path and on the kernel path (norm and RoPE kernels run in Triton's interpreter on
CPU tensors, tests/conftest.py; the modules' dispatch is pointed at them).
"""

from __future__ import annotations

import copy
import types

import pytest
import torch

from specpilot.kernels import norm as KN
from specpilot.kernels import rope as KR
from specpilot.layers import norm as layers_norm
from specpilot.layers import rotary as rotary_mod
from specpilot.layers.fused import fuse_projections, project
from specpilot.layers.rotary import RotaryEmbedding
from specpilot.models import muse_glimmer

HQ, HKV, D, HIDDEN, T = 4, 2, 16, 64, 7
CONFIG = types.SimpleNamespace(
    hidden_size=HIDDEN, num_attention_heads=HQ, num_key_value_heads=HKV, head_dim=D,
    attention_bias=False, rms_norm_eps=1e-6, qk_scale_factor=0.37,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0})


class Recorder:
    """Attention backend that records its inputs and returns q (attention left out)."""

    def forward(self, q, k, v, layer_id, scale, window=None, gate=None):
        self.seen = (q, k, v)
        return q.clone() if gate is None else q * torch.sigmoid(gate)


def old_forward(a, positions, x, backend):
    """MuseAttention.forward before the q / k norm fusion and the q_scale folding."""
    t = x.shape[0]
    q, k, v, gate = project(a, "qkvg_proj", x)
    q = a.qk_norm(q.view(t, a.num_heads, a.head_dim))
    q = q * a.qk_scale_factor
    k = a.qk_norm(k.view(t, a.num_kv_heads, a.head_dim))
    v = v.view(t, a.num_kv_heads, a.head_dim)
    if a.rotary is not None:
        q, k = a.rotary[0](positions, q, k)
    o = backend.forward(q, k, v, a.layer_id, a.scaling, a.window)
    o = o.reshape(t, a.num_heads * a.head_dim) * torch.sigmoid(gate)
    return a.o_proj(o)


def modules(dtype, rope):
    torch.manual_seed(3)
    rotary = RotaryEmbedding(CONFIG, D, 64) if rope else None
    unfused = muse_glimmer.MuseAttention(CONFIG, 0, rotary, None).to(dtype)
    fused = copy.deepcopy(unfused)
    assert fuse_projections(fused) == 1 and "qkvg_proj" in fused.fused_sizes
    return unfused, fused


@pytest.mark.parametrize("kernels", [False, pytest.param(True, marks=pytest.mark.interpreter)])
@pytest.mark.parametrize("rope", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_attention_front_end_unchanged(monkeypatch, dtype, rope, kernels):
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(T, HIDDEN, generator=g) * 2).to(dtype)
    positions = torch.randint(0, 64, (T,), generator=g)
    monkeypatch.setattr(layers_norm, "USE_TRITON", False)
    norm_calls = []
    if kernels:
        def counting(*args, **kw):
            norm_calls.append(args[0].shape)
            return KN.rms_norm_fp32_weight(*args, **kw)

        monkeypatch.setattr(muse_glimmer, "triton_kernels",
                            lambda x: types.SimpleNamespace(rms_norm_fp32_weight=counting))
        monkeypatch.setattr(rotary_mod, "triton_kernels", lambda x, name: KR)
        # the norms in launches of their own here (inside the RoPE launch: the next test)
        monkeypatch.setattr(rotary_mod, "FUSE_QK_NORM", False)
    for a, norms in zip(modules(dtype, rope), (2, 1)):  # unfused: q and k apart; fused: one
        with torch.no_grad():
            ref_out = old_forward(a, positions, x, ref := Recorder())
            norm_calls.clear()
            out = a(positions, x, new := Recorder())
        assert len(norm_calls) == (norms if kernels else 0)
        for got, want in zip((out, *new.seen), (ref_out, *ref.seen)):
            assert got.dtype == want.dtype and torch.equal(got, want)


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_attention_norms_inside_the_rope_launch(monkeypatch, dtype):
    """On the Triton path with FUSE_QK_NORM (the default) the q / k norm, the q scale and RoPE
    are one launch: no norm launch of its own, outputs within an ulp of the old front end (the
    norm's sum of squares in another order), for the fused and the unfused projections."""
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(T, HIDDEN, generator=g) * 2).to(dtype)
    positions = torch.randint(0, 64, (T,), generator=g)
    monkeypatch.setattr(layers_norm, "USE_TRITON", False)
    norm_calls, rope_calls = [], []
    def counting_norm(*args, **kw):
        norm_calls.append(args[0].shape)
        return KN.rms_norm_fp32_weight(*args, **kw)

    monkeypatch.setattr(muse_glimmer, "triton_kernels",
                        lambda x: types.SimpleNamespace(rms_norm_fp32_weight=counting_norm))
    monkeypatch.setattr(layers_norm, "_kernel_module", lambda name: KN)

    def counting_rope(*args, **kw):
        rope_calls.append(kw.get("q_norm", args[6] if len(args) > 6 else None))
        return KR.rope(*args, **kw)

    monkeypatch.setattr(rotary_mod, "triton_kernels",
                        lambda x, name: types.SimpleNamespace(rope=counting_rope))
    tol = dict(rtol=2e-6, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-3, atol=1e-3)
    for a in modules(dtype, True):
        with torch.no_grad():
            ref_out = old_forward(a, positions, x, ref := Recorder())  # norms, then RoPE
            norm_calls.clear()
            rope_calls.clear()
            out = a(positions, x, new := Recorder())
        assert not norm_calls and len(rope_calls) == 1 and rope_calls[0] is not None
        for got, want in zip((out, *new.seen), (ref_out, *ref.seen)):
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want, **tol)
