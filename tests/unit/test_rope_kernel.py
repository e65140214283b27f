"""Triton RoPE kernel (specpilot/kernels/rope.py) against RotaryEmbedding.rotate, and the
Muse-Glimmer RMSNorm path of kernels/norm.py against MuseRMSNorm's torch code.

Without CUDA the kernels run in Triton's interpreter on CPU tensors (tests/conftest.py sets
TRITON_INTERPRET=1 before triton is imported); the wrappers are called directly, and the modules'
dispatch is checked by pointing their kernel accessor at the interpreted module. bf16 runs on
CUDA only (the interpreter does not support it).

RoPE is expected bit for bit (torch.equal): the kernel rounds to x's dtype exactly where torch's
separate kernels do (cos / sin cast, each product, the sum), and fp32 products are not contracted
into an fma. The norm is not: its sum of squares runs in another order than torch's and it takes
rsqrt where MuseRMSNorm takes pow(., -0.5), so fp32 agrees to ~1e-6 relative and 16-bit outputs
now and then land one ulp apart.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from specpilot.kernels import norm as KN
from specpilot.kernels import rope as KR
from specpilot.layers import norm as layers_norm
from specpilot.layers import rotary as rotary_mod
from specpilot.layers.rotary import RotaryEmbedding
from specpilot.models import muse_glimmer

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"

DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if CUDA else [])
HEAD_DIM, MAX_POS = 32, 4096
EPS = 1e-6


@pytest.fixture(autouse=True)
def _torch_modules(monkeypatch):
    monkeypatch.setattr(layers_norm, "USE_TRITON", False)  # references run the torch code


def rand(*shape, dtype, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype=dtype, device=DEV)


def make_rotary(partial: bool) -> RotaryEmbedding:
    params = {"rope_type": "default", "rope_theta": 10000.0}
    if partial:
        params["partial_rotary_factor"] = 0.25  # as Qwen3.5: 8 of 32 channels rotate
    c = transformers.Qwen3Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                 head_dim=HEAD_DIM, rope_parameters=params)
    rot = RotaryEmbedding(c, HEAD_DIM, MAX_POS).to(DEV)
    assert rot.rotary_dim == (HEAD_DIM // 4 if partial else HEAD_DIM)
    return rot


def positions(t: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, MAX_POS, (t,), generator=g, dtype=torch.int64).to(DEV)  # unsorted


def split_qk(t, hq, hkv, dtype, seed):
    """q [t, hq, D], k [t, hkv, D]: strided views of one fused qkv output [t, (hq+2hkv)*D]."""
    qkv = rand(t, (hq + 2 * hkv) * HEAD_DIM, dtype=dtype, seed=seed, scale=3.0)
    q, k, _ = qkv.split([hq * HEAD_DIM, hkv * HEAD_DIM, hkv * HEAD_DIM], dim=-1)
    return qkv, q.view(t, hq, HEAD_DIM), k.view(t, hkv, HEAD_DIM)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("t", [1, 5])
@pytest.mark.parametrize("hq,hkv,tile", [(4, 2, KR._TILE), (3, 1, KR._TILE), (4, 2, 64),
                                         (0, 2, KR._TILE)])
def test_rope_matches_rotate(monkeypatch, dtype, partial, t, hq, hkv, tile):
    """GQA / MQA heads, strided q / k views, unsorted positions; tile 64: two heads per program,
    so q spans two head blocks (and k's block is half masked); no q heads (the drafter's context
    keys: k alone)."""
    monkeypatch.setattr(KR, "_TILE", tile)
    rot = make_rotary(partial)
    qkv, q, k = split_qk(t, hq, hkv, dtype, seed=10 * t + hq)
    assert t == 1 or not (q.is_contiguous() and hq or k.is_contiguous())  # rows of the fused output
    pos = positions(t, seed=t)
    before = qkv.clone()
    q_out, k_out = KR.rope(pos, q, k, rot.cos_table, rot.sin_table)
    assert torch.equal(qkv, before)  # inputs untouched
    for out, x in ((q_out, q), (k_out, k)):
        ref = rot.rotate(pos, x)
        assert out.shape == ref.shape and out.dtype == ref.dtype and out.is_contiguous()
        assert torch.equal(out, ref), (out.float() - ref.float()).abs().max().item()
    if partial:  # channels past rotary_dim pass through untouched
        assert torch.equal(q_out[..., rot.rotary_dim:], q[..., rot.rotary_dim:])


def test_rope_contiguous_and_forward_dispatch(monkeypatch):
    """Contiguous q / k, int32 positions; RotaryEmbedding.forward takes the kernel when its
    accessor returns one (on CUDA: layers.norm.triton_kernels(q, "rope"))."""
    rot = make_rotary(partial=False)
    q = rand(3, 4, HEAD_DIM, dtype=torch.float16, seed=1, scale=3.0)
    k = rand(3, 2, HEAD_DIM, dtype=torch.float16, seed=2, scale=3.0)
    pos = positions(3, seed=3)
    ref = rot(pos, q, k)  # torch
    monkeypatch.setattr(rotary_mod, "triton_kernels", lambda x, name: KR)
    out = rot(pos.to(torch.int32), q, k)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    assert layers_norm.triton_kernels(q, "rope") is None  # USE_TRITON off


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("scale", [0.7, 1.0 / 3.0, 12.25])
def test_rope_q_scale(monkeypatch, dtype, partial, scale):
    """q_scale: q_out equals rotate(positions, q * scale) (torch's multiply by a python float,
    one rounding to q's dtype), k_out is unscaled; tile 64 splits q over two head blocks. The
    module's forward gives the same on both paths."""
    monkeypatch.setattr(KR, "_TILE", 64)
    rot = make_rotary(partial)
    _, q, k = split_qk(5, 4, 2, dtype, seed=7)
    pos = positions(5, seed=8)
    q_out, k_out = KR.rope(pos, q, k, rot.cos_table, rot.sin_table, q_scale=scale)
    ref_q = rot.rotate(pos, q * scale)
    assert torch.equal(q_out, ref_q), (q_out.float() - ref_q.float()).abs().max().item()
    assert torch.equal(k_out, rot.rotate(pos, k))
    assert not torch.equal(q_out, rot.rotate(pos, q))  # the scale did something
    ref = rot(pos, q, k, q_scale=scale)  # torch path
    monkeypatch.setattr(rotary_mod, "triton_kernels", lambda x, name: KR)
    out = rot(pos, q, k, q_scale=scale)
    for a, b in zip((q_out, k_out), ref):
        assert torch.equal(a, b)
    for a, b in zip(out, ref):
        assert torch.equal(a, b)


def norm_tol(dtype: torch.dtype) -> dict:
    if dtype == torch.float32:
        return dict(rtol=2e-6, atol=1e-6)
    return dict(rtol=torch.finfo(dtype).eps, atol=1e-5)  # one ulp (a single rounding)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_scale", [False, True])
def test_muse_rms_norm(monkeypatch, dtype, with_scale):
    """Weightless per-head q norm on a strided view of a fused output, and the weighted norm on
    plain rows; the module's dispatch (triton_kernels) pointed at the interpreted kernels."""
    t, heads, dim = 3, 4, 128
    m = muse_glimmer.MuseRMSNorm(dim if with_scale else None, EPS, with_scale=with_scale).to(DEV)
    if with_scale:
        with torch.no_grad():
            m.weight.copy_(rand(dim, dtype=torch.float32, seed=4, scale=0.5) + 1.0)
    m = m.to(dtype)
    fused = rand(t, heads * dim + 40, dtype=dtype, seed=5, scale=3.0)
    xs = (fused[:, :heads * dim].view(t, heads, dim), rand(5, dim, dtype=dtype, seed=6))
    with torch.no_grad():
        refs = [m(x) for x in xs]
        monkeypatch.setattr(muse_glimmer, "triton_kernels", lambda x: KN)
        for x, ref in zip(xs, refs):
            out = m(x)
            assert out.dtype == ref.dtype == dtype and out.shape == ref.shape
            torch.testing.assert_close(out, ref, **norm_tol(dtype))
            direct = KN.rms_norm_fp32_weight(x, m.weight, EPS)
            assert torch.equal(direct, out)


def head_norms(kind: str, dtype):
    """(q norm, k norm) modules of each attention kind, with non-trivial weights."""
    from specpilot.layers.norm import RMSNorm, ZeroCenteredRMSNorm

    if kind == "muse":  # one weightless norm shared by q and k
        m = muse_glimmer.MuseRMSNorm(None, EPS, with_scale=False).to(DEV)
        return m, m
    cls = RMSNorm if kind == "plain" else ZeroCenteredRMSNorm
    mods = []
    for seed in (11, 12):
        m = cls(HEAD_DIM, EPS).to(DEV)
        with torch.no_grad():
            m.weight.copy_(rand(HEAD_DIM, dtype=torch.float32, seed=seed, scale=0.5)
                           + (1.0 if kind == "plain" else 0.0))
        mods.append(m.to(dtype))
    return tuple(mods)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind,partial,hq,tile", [("plain", False, 4, KR._TILE),
                                                  ("zero_centred", True, 4, 64),
                                                  ("muse", False, 4, KR._TILE),
                                                  ("plain", False, 0, KR._TILE)])
def test_rope_with_head_norms(monkeypatch, dtype, kind, partial, hq, tile):
    """The q / k head norms inside the RoPE launch (RotaryEmbedding.forward with q_norm /
    k_norm on the Triton path) against the norm modules then RoPE: the torch path within an ulp
    (the norm's sum of squares in another order), and the two launches it replaces (the norm
    kernels, then the RoPE kernel) likewise; Muse's q_scale after the norm; strided views of a
    fused output; hq 0: keys alone (the drafter's context keys). With FUSE_QK_NORM off the
    module runs the norms on their own."""
    monkeypatch.setattr(KR, "_TILE", tile)
    rot = make_rotary(partial)
    qn, kn = head_norms(kind, dtype)
    scale = 0.37 if kind == "muse" else None
    _, q, k = split_qk(5, hq, 2, dtype, seed=31)
    pos = positions(5, seed=32)
    with torch.no_grad():
        ref = rot(pos, qn(q), kn(k), q_scale=scale)  # torch: norms, then RoPE
        monkeypatch.setattr(rotary_mod, "triton_kernels", lambda x, name: KR)
        monkeypatch.setattr(layers_norm, "_kernel_module", lambda name: KN)
        fused = rot(pos, q, k, q_scale=scale, q_norm=qn, k_norm=kn)
        # the norm modules' own launches (kernels/norm.py), as on CUDA
        monkeypatch.setattr(layers_norm, "triton_kernels", lambda x, name="norm": KN)
        monkeypatch.setattr(muse_glimmer, "triton_kernels", lambda x, name="norm": KN)
        two = KR.rope(pos, qn(q), kn(k), rot.cos_table, rot.sin_table, scale)
        monkeypatch.setattr(rotary_mod, "FUSE_QK_NORM", False)
        unfused = rot(pos, q, k, q_scale=scale, q_norm=qn, k_norm=kn)
    for a, b, c, d in zip(fused, ref, two, unfused):
        assert a.shape == b.shape and a.dtype == b.dtype == dtype and a.is_contiguous()
        torch.testing.assert_close(a, b, **norm_tol(dtype))
        torch.testing.assert_close(a, c, **norm_tol(dtype))
        assert torch.equal(c, d)


def test_rope_head_norm_errors():
    rot = make_rotary(False)
    q = rand(2, 4, HEAD_DIM, dtype=torch.float16, seed=1)
    k = rand(2, 2, HEAD_DIM, dtype=torch.float16, seed=2)
    pos = positions(2, seed=3)
    w32 = torch.ones(HEAD_DIM, device=DEV)
    with pytest.raises(ValueError, match="plain norm's weight"):
        KR.rope(pos, q, k, rot.cos_table, rot.sin_table, q_norm=KN.head_norm(w32, EPS))
    with pytest.raises(ValueError, match="does not fit"):
        KR.rope(pos, q, k, rot.cos_table, rot.sin_table,
                k_norm=KN.head_norm(torch.ones(HEAD_DIM + 1, device=DEV, dtype=q.dtype), EPS))
    with pytest.raises(ValueError, match="needs its weight"):
        KN.head_norm(None, EPS)
    # a plain norm whose weight has another dtype is not folded: the module says so
    from specpilot.layers.norm import RMSNorm
    assert RMSNorm(HEAD_DIM, EPS).to(DEV).head_spec(torch.float16) is None
