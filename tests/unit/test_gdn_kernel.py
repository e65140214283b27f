"""kernels/gdn.py on the Triton interpreter against the torch reference (layers/gdn.py): ragged
requests over pool rows, fresh requests, verify (no state write), gates formed in the kernel,
and the all-layer commit against one layer at a time."""

import pytest
import torch
import torch.nn.functional as F

from specpilot.kernels.gdn import gated_delta_rule
from specpilot.layers.gdn import delta_rule, l2norm

HK, HV, DK, DV = 2, 4, 16, 24  # DV not a power of two: masked columns
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # CPU: the Triton interpreter


@pytest.fixture(autouse=True)
def _on_device():
    with torch.device(DEV):  # every tensor a test builds lives where the kernel runs
        yield


def meta(rows, fresh, lens):
    starts = [sum(lens[:i]) for i in range(len(lens))]
    m = torch.tensor([rows, fresh, starts, lens], dtype=torch.int32)
    return m[0], m[1], m[2], m[3]


def reference(q, k, v, g, beta, init, scale):
    t, rep = q.shape[0], HV // HK
    qq = l2norm(q.reshape(t, HK, DK).float()).repeat_interleave(rep, 1) * scale
    kk = l2norm(k.reshape(t, HK, DK).float()).repeat_interleave(rep, 1)
    return delta_rule(qq, kk, v.reshape(t, HV, DV).float(), g, beta, init)


def inputs(t, dtype=torch.float32, layers=()):
    y = torch.randn(*layers, t, 2 * HK * DK + HV * DV, dtype=dtype)
    q, k, v = y.split([HK * DK, HK * DK, HV * DV], dim=-1)  # row-strided views, as in the model
    return q, k, v, -torch.rand(*layers, t, HV), torch.rand(*layers, t, HV)


@pytest.mark.parametrize("write", [True, False])
def test_ragged_requests_over_pool_rows(write):
    torch.manual_seed(0)
    lens, rows, fresh = [3, 1, 5], [4, 1, 2], [0, 1, 0]
    q, k, v, g, beta = inputs(sum(lens))
    pool = torch.randn(6, HV, DK, DV)
    before = pool.clone()
    out = gated_delta_rule(q, k, v, g, beta, pool, *meta(rows, fresh, lens), key_heads=HK,
                           scale=DK ** -0.5, write_state=write)
    start = 0
    for row, fr, n in zip(rows, fresh, lens):
        s = slice(start, start + n)
        init = torch.zeros(HV, DK, DV) if fr else before[row]
        o, final = reference(q[s], k[s], v[s], g[s], beta[s], init, DK ** -0.5)
        torch.testing.assert_close(out[s], o, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(pool[row], final if write else before[row], rtol=1e-5,
                                   atol=1e-6)
        start += n
    for row in (0, 3, 5):  # rows no request names are never touched
        assert torch.equal(pool[row], before[row])


def test_gates_formed_in_kernel():
    """gate=(A_log, dt_bias) with raw a, b: the same as passing g, beta computed as the layer
    does (g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b))."""
    torch.manual_seed(1)
    lens = [4, 2]
    q, k, v, _, _ = inputs(sum(lens))
    a, b = torch.randn(sum(lens), HV) * 3, torch.randn(sum(lens), HV)
    a[0, 0] = 25.0  # softplus's linear branch
    a_log, dt_bias = torch.randn(HV) * 0.5, torch.randn(HV)
    g = -a_log.exp() * F.softplus(a + dt_bias)
    beta = b.sigmoid()
    m = meta([0, 1], [1, 1], lens)
    p1, p2 = torch.zeros(2, HV, DK, DV), torch.zeros(2, HV, DK, DV)
    o1 = gated_delta_rule(q, k, v, a, b, p1, *m, key_heads=HK, scale=0.3, gate=(a_log, dt_bias))
    o2 = gated_delta_rule(q, k, v, g, beta, p2, *m, key_heads=HK, scale=0.3)
    torch.testing.assert_close(o1, o2, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(p1, p2, rtol=1e-5, atol=1e-6)


def test_layered_commit_equals_per_layer():
    torch.manual_seed(2)
    layers, lens = 3, [6, 6]
    _, k, v, g, beta = inputs(sum(lens), layers=(layers,))
    pool = torch.randn(layers, 3, HV, DK, DV)
    per_layer = pool.clone()
    m = meta([2, 0], [0, 0], [4, 1])  # replay 4 and 1 of the 6 rows
    m[2].copy_(torch.tensor([0, 6], dtype=torch.int32))
    gated_delta_rule(None, k, v, g, beta, pool, *m, key_heads=HK)
    for lyr in range(layers):
        gated_delta_rule(None, k[lyr], v[lyr], g[lyr], beta[lyr], per_layer[lyr], *m,
                         key_heads=HK)
    assert torch.equal(pool, per_layer)


def test_bad_inputs_are_refused():
    q, k, v, g, beta = inputs(2)
    pool = torch.zeros(1, HV, DK, DV)
    m = meta([0], [1], [2])
    with pytest.raises(ValueError, match="fp32"):
        gated_delta_rule(q, k, v, g.half(), beta.half(), pool, *m, key_heads=HK)
    with pytest.raises(ValueError, match="multiple"):
        gated_delta_rule(q, k, v, g, beta, pool, *m, key_heads=3)
    with pytest.raises(ValueError, match="contiguous"):
        gated_delta_rule(q, k, v, g, beta, pool.half(), *m, key_heads=HK)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16])
def test_stashed_gates_and_output_dtype(out_dtype):
    """VERIFY's stash: the raw gate inputs land in the stash views (one copy per row and head,
    whatever the number of Dv tiles), and out_dtype rounds the fp32 output once, as .to()."""
    torch.manual_seed(3)
    lens = [3, 3]
    q, k, v, _, _ = inputs(sum(lens))
    a, b = torch.randn(sum(lens), HV), torch.randn(sum(lens), HV)
    gate = (torch.randn(HV) * 0.5, torch.randn(HV))
    m = meta([1, 0], [0, 1], lens)
    pool = torch.randn(2, HV, DK, DV)
    ref = gated_delta_rule(q, k, v, a, b, pool.clone(), *m, key_heads=HK, gate=gate,
                           write_state=False)
    sa, sb = torch.zeros(2, 8, HV), torch.zeros(2, 8, HV)
    out = gated_delta_rule(q, k, v, a, b, pool, *m, key_heads=HK, gate=gate, write_state=False,
                           out_dtype=out_dtype, stash_gates=(sa[1, :6], sb[1, :6]), block_v=8)
    assert out.dtype == out_dtype and torch.equal(out, ref.to(out_dtype))
    assert torch.equal(sa[1, :6], a) and torch.equal(sb[1, :6], b)
    assert not sa[0].any() and not sa[1, 6:].any() and not sb[0].any()
    with pytest.raises(ValueError, match="stash_gates"):
        gated_delta_rule(q, k, v, a, b, pool, *m, key_heads=HK, gate=gate,
                         stash_gates=(sa[1], sb[1]))


@pytest.mark.parametrize("block_v", [None, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_fused_conv_decode_equals_conv_then_recurrence(dtype, block_v):
    """conv_gated_delta_decode (DECODE: conv, gates and recurrence in one launch, the last reader
    of a key head's q / k windows writing them) == kernels/conv.causal_conv followed by
    gated_delta_rule: outputs, recurrent state and conv windows, for requests over shuffled pool
    rows with a fresh one among them; rows no request names are untouched, the counts left at
    zero. block_v 8 gives 3 value tiles per head, so 6 programs share each key head."""
    from specpilot.kernels.conv import causal_conv
    from specpilot.kernels.gdn import conv_gated_delta_decode

    torch.manual_seed(7)
    c, kk = 2 * HK * DK + HV * DV, 4
    rows, fresh = [4, 1, 2], [0, 1, 0]
    n = len(rows)
    wide = torch.randn(n, c + 9, dtype=dtype)
    x = wide[:, 3:3 + c]  # row-strided, as a slice of the fused projection
    ab = torch.randn(n, 2 * HV, dtype=dtype) * 2
    b, a = ab[:, :HV], ab[:, HV:]
    weight = torch.randn(c, kk) * 0.5
    gate = (torch.randn(HV) * 0.5, torch.randn(HV))
    conv0 = torch.randn(6, c, kk - 1).to(dtype).float()  # windows hold x-dtype values
    rec0 = torch.randn(6, HV, DK, DV)
    r, f = (torch.tensor(t, dtype=torch.int32) for t in (rows, fresh))
    conv_ref, rec_ref = conv0.clone(), rec0.clone()
    y = causal_conv(x, weight, conv_ref, r, f, 1, write_state=True)
    q, k, v = y.split([HK * DK, HK * DK, HV * DV], dim=-1)
    starts, lens = torch.arange(n, dtype=torch.int32), torch.ones(n, dtype=torch.int32)
    want = gated_delta_rule(q, k, v, a, b, rec_ref, r, f, starts, lens, key_heads=HK,
                            scale=DK ** -0.5, gate=gate, out_dtype=dtype)
    conv1, rec1 = conv0.clone(), rec0.clone()
    counters = torch.zeros(n * HK + 2, dtype=torch.int32)
    got = conv_gated_delta_decode(x, weight, conv1, a, b, rec1, r, f, counters, key_heads=HK,
                                  gate=gate, scale=DK ** -0.5, block_v=block_v)
    assert got.dtype == dtype
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(got, want, **tol)
    torch.testing.assert_close(rec1, rec_ref, **tol)
    assert torch.equal(conv1, conv_ref)  # the windows: exact copies of inputs
    assert not counters.any()
    for row in (0, 3, 5):
        assert torch.equal(conv1[row], conv0[row]) and torch.equal(rec1[row], rec0[row])
    with pytest.raises(ValueError, match="counters"):
        conv_gated_delta_decode(x, weight, conv1, a, b, rec1, r, f, counters[:2], key_heads=HK,
                                gate=gate)
    with pytest.raises(ValueError, match="conv channels"):
        conv_gated_delta_decode(x, weight, conv1, a, b, rec1, r, f, counters, key_heads=1,
                                gate=gate)
