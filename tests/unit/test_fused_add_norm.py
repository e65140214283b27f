"""Residual adds fused into the following norm (forward_add, the layers' (x, delta) hand-over).

The torch path must equal the old separate add-then-norm bit for bit; the Triton path (run here in
Triton's interpreter on CPU tensors, tests/conftest.py sets TRITON_INTERPRET=1 without CUDA) is
forced on by patching the norm modules' kernel dispatch, and must match within fp32 rounding.
"""

from __future__ import annotations

import pytest
import torch

from specpilot.engine.state_pool import RecurrentBatch, RecurrentStatePool
from specpilot.kernels import norm as K
from specpilot.layers import norm as layers_norm
from specpilot.layers.norm import RMSNorm, ZeroCenteredRMSNorm
from specpilot.models import muse_glimmer
from specpilot.models.muse_glimmer import MuseRMSNorm
from tests.e2e.tiny_models import FreshRequestBackend

EPS = 1e-6
TOL = dict(rtol=1e-5, atol=1e-5)
# the forced Triton path runs the kernels on CPU tensors, which needs the interpreter; on a GPU
# machine the layers reach the kernels through their normal CUDA dispatch instead, which
# scripts/gpu_graph_check.py's exactness runs check against the torch reference engine


def rand(*shape, dtype=torch.float32, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def norms(dim):
    ms = [RMSNorm(dim, EPS), ZeroCenteredRMSNorm(dim, EPS), MuseRMSNorm(dim, EPS),
          MuseRMSNorm(None, EPS, with_scale=False)]
    with torch.no_grad():
        for i, m in enumerate(ms):
            if m.weight is not None:
                m.weight.add_(rand(dim, seed=10 + i, scale=0.3))
    return ms


def force_triton(monkeypatch):
    """Norm modules take the Triton kernels for CPU tensors too; returns a counter of the norm
    kernel calls that fused a residual add."""
    fused = [0]

    def counting(fn):
        def wrapped(*a, residual=None, **kw):
            fused[0] += residual is not None
            return fn(*a, residual=residual, **kw)
        return wrapped

    monkeypatch.setattr(K, "rms_norm", counting(K.rms_norm))
    monkeypatch.setattr(K, "rms_norm_fp32_weight", counting(K.rms_norm_fp32_weight))
    dispatch = lambda x, name="norm": layers_norm._kernel_module(name)  # noqa: E731
    monkeypatch.setattr(layers_norm, "triton_kernels", dispatch)
    monkeypatch.setattr(muse_glimmer, "triton_kernels", dispatch)
    return fused


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_forward_add_torch_path_is_add_then_norm(dtype):
    x, d = rand(5, 48, dtype=dtype, seed=1, scale=3.0), rand(5, 48, dtype=dtype, seed=2)
    for m in norms(48):
        m = m.to(dtype)
        with torch.no_grad():
            out, h = m.forward_add(x, d)
            assert torch.equal(h, x + d) and torch.equal(out, m(x + d))
            out, h = m.forward_add(x, None)
            assert h is x and torch.equal(out, m(x))


@pytest.mark.interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_forward_add_triton_path(monkeypatch, dtype):
    x, d = rand(3, 4, 48, dtype=dtype, seed=3, scale=3.0), rand(3, 4, 48, dtype=dtype, seed=4)
    ms = norms(48)
    with torch.no_grad():
        ref = [m.to(dtype)(x + d) for m in ms]
        fused = force_triton(monkeypatch)
        for m, r in zip(ms, ref):
            out, h = m.forward_add(x, d)
            assert torch.equal(h, x + d)  # the add rounds as torch's
            assert out.dtype == r.dtype
            torch.testing.assert_close(out, r, **(TOL if dtype == torch.float32 else
                                                   dict(rtol=2e-3, atol=1e-5)))
    assert fused[0] == len(ms)


PRE_STYLES = {  # pre_norm arguments -> the separate launch the fused one replaces
    "zero_centred": (lambda w: K.pre_norm(w, 1e-5, zero_centred=True),
                     lambda r, w: K.rms_norm(r, w, 1e-5, zero_centred=True)),
    "fp32_weight": (lambda w: K.pre_norm(w, 1e-5), lambda r, w: K.rms_norm_fp32_weight(r, w, 1e-5)),
    "no_weight": (lambda w: K.pre_norm(None, 1e-5),
                  lambda r, w: K.rms_norm_fp32_weight(r, None, 1e-5)),
}


@pytest.mark.interpreter
@pytest.mark.parametrize("style", sorted(PRE_STYLES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_pre_norm_kernel_equals_two_launches(style, dtype):
    """rms_norm(x, residual=r, pre=...) == rms_norm(x, residual=<pre's norm>(r)): the post-norm
    folded into the pre-norm's launch rounds as its own launch did (same numbers, bit for bit)."""
    x = rand(2, 3, 40, dtype=dtype, seed=11, scale=3.0)
    r = rand(2, 3, 40, dtype=dtype, seed=12, scale=5.0)
    w, pw = rand(40, seed=13, scale=0.3), rand(40, seed=14, scale=0.3)
    make_pre, separate = PRE_STYLES[style]
    for outer in (lambda res, pre: K.rms_norm(x, w.to(dtype), EPS, zero_centred=True,
                                              residual=res, pre=pre),
                  lambda res, pre: K.rms_norm_fp32_weight(x, w, EPS, residual=res, pre=pre)):
        out, h = outer(r, make_pre(pw))
        want_out, want_h = outer(separate(r, pw), None)
        assert torch.equal(h, want_h) and torch.equal(out, want_out)
    with pytest.raises(ValueError, match="residual"):
        K.rms_norm(x, w, EPS, pre=make_pre(pw))
    with pytest.raises(ValueError, match="pre weight"):
        K.rms_norm(x, w, EPS, residual=r, pre=K.pre_norm(rand(8), 1e-5))


@pytest.mark.interpreter
@pytest.mark.parametrize("fold", [True, False])
def test_pending_norm_folds_into_forward_add(monkeypatch, fold):
    """forward_add(x, PendingNorm(raw, post)) == forward_add(x, post(raw)); on the Triton path
    one kernel call (with `pre`) does both unless FUSE_PRE_NORM is off (then two)."""
    x, raw = rand(5, 48, seed=15, scale=3.0), rand(5, 48, seed=16, scale=4.0)
    post, zc, muse = norms(48)[1], ZeroCenteredRMSNorm(48, EPS), MuseRMSNorm(48, EPS)
    with torch.no_grad():
        zc.weight.add_(rand(48, seed=17, scale=0.3))
        refs = [m.forward_add(x, post(raw)) for m in (zc, muse)]
        for m, (ref_out, ref_h) in zip((zc, muse), refs):  # torch path: resolve, then add
            out, h = m.forward_add(x, layers_norm.PendingNorm(raw, post))
            assert torch.equal(out, ref_out) and torch.equal(h, ref_h)
        monkeypatch.setattr(layers_norm, "FUSE_PRE_NORM", fold)
        calls = []
        for name in ("rms_norm", "rms_norm_fp32_weight"):
            def spy(*a, _fn=getattr(K, name), **kw):
                calls.append(kw.get("pre") is not None)
                return _fn(*a, **kw)
            monkeypatch.setattr(K, name, spy)
        dispatch = lambda x, name="norm": layers_norm._kernel_module(name)  # noqa: E731
        monkeypatch.setattr(layers_norm, "triton_kernels", dispatch)
        monkeypatch.setattr(muse_glimmer, "triton_kernels", dispatch)
        for m, (ref_out, ref_h) in zip((zc, muse), refs):
            calls.clear()
            out, h = m.forward_add(x, layers_norm.PendingNorm(raw, post))
            assert calls == ([True] if fold else [False, False])
            torch.testing.assert_close(out, ref_out, **TOL)
            torch.testing.assert_close(h, ref_h, **TOL)


# --- whole models: the layer stack with feature capture --------------------------------------


class Backend(FreshRequestBackend):
    """One fresh request (tiny_models.FreshRequestBackend), plus the torch reference recurrence
    for Gated DeltaNet layers."""

    def __init__(self, model, t):
        self.t = t
        if hasattr(model, "recurrent_state_spec"):
            pool = RecurrentStatePool(num_rows=1, device=torch.device("cpu"),
                                      **model.recurrent_state_spec())
            self.recurrent = RecurrentBatch(pool, [0], [0], verify=False)

    def row_segments(self):
        return [(0, self.t)]


def old_forward(model, ids, positions, backend, capture):
    """The layer stack as it was before the fusion: every residual add on its own."""
    text = getattr(model, "text", None) or model.model
    x = text.embed_tokens(ids)
    if hasattr(text, "embed_norm"):
        x = text.embed_norm(x)
    feats = {}
    for i, lyr in enumerate(text.layers):
        if hasattr(lyr, "pre_feedforward_layernorm"):  # Muse: sandwich norms
            x = x + lyr.post_attention_layernorm(lyr.self_attn(positions, lyr.input_layernorm(x),
                                                               backend))
            x = x + lyr.post_feedforward_layernorm(lyr.mlp(lyr.pre_feedforward_layernorm(x)))
        else:
            mixer = getattr(lyr, "_mixer", [getattr(lyr, "self_attn", None)])[0]
            x = x + mixer(positions, lyr.input_layernorm(x), backend)
            x = x + lyr.mlp(lyr.post_attention_layernorm(x))
        feats[i] = x
    h = text.norm(x)
    last = len(text.layers) - 1
    return h, torch.cat([h if i == last else feats[i] for i in capture], dim=-1)


@pytest.fixture(scope="module", params=["llama", "qwen3", "qwen3_5", "muse"])
def tiny(request, tmp_path_factory):
    from specpilot.models.loader import build_model
    from tests.e2e.tiny_models import make_tiny
    from tests.e2e.tiny_muse import make_tiny_muse

    folder = tmp_path_factory.mktemp(request.param)
    path = make_tiny_muse(folder) if request.param == "muse" else make_tiny(request.param, folder)
    model, _ = build_model(path, torch.float32, torch.device("cpu"), 64)
    with torch.no_grad():  # HF initialises plain norm gains to 1: make them matter
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p.add_(rand(p.shape[0], seed=len(name), scale=0.1))
    return model


@pytest.mark.interpreter
def test_model_fused_matches_torch(tiny, monkeypatch):
    model = tiny
    n = len((getattr(model, "text", None) or model.model).layers)
    capture = (n // 2, n - 1)  # a middle layer and the last (reported after the final norm)
    ids = torch.randint(3, 250, (13,), generator=torch.Generator().manual_seed(5))
    pos = torch.arange(ids.shape[0])
    monkeypatch.setattr(layers_norm, "USE_TRITON", False)
    with torch.no_grad():
        hidden, aux = model(ids, pos, Backend(model, len(ids)), capture)
        old_h, old_aux = old_forward(model, ids, pos, Backend(model, len(ids)), capture)
        assert torch.equal(hidden, old_h) and torch.equal(aux, old_aux)  # torch path unchanged
        assert model(ids, pos, Backend(model, len(ids)))[1] is None

        fused = force_triton(monkeypatch)
        f_hidden, f_aux = model(ids, pos, Backend(model, len(ids)), capture)
    torch.testing.assert_close(f_hidden, hidden, **TOL)
    torch.testing.assert_close(f_aux, aux, **TOL)
    # 2 adds per layer, all fused but the middle captured layer's output add
    assert fused[0] == 2 * n - 1


def test_kernels_only_without_autograd(monkeypatch):
    """The Triton kernels have no backward: with grad enabled (training) the torch path runs."""
    import types

    cuda_like = types.SimpleNamespace(is_cuda=True)
    monkeypatch.setattr(layers_norm, "USE_TRITON", True)
    with torch.no_grad():
        assert layers_norm.triton_kernels(cuda_like) is K
    with torch.inference_mode():
        assert layers_norm.triton_kernels(cuda_like, "rope") is not None
    with torch.enable_grad():
        assert layers_norm.triton_kernels(cuda_like) is None
    assert layers_norm.triton_kernels(rand(2, 4)) is None  # CPU tensors: torch
