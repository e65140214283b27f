"""W12 Triton kernels (specpilot/w12/kernel.py) and W12Linear (specpilot/w12/linear.py).

Without a GPU the kernels run in the Triton interpreter on CPU tensors: this module sets
TRITON_INTERPRET=1 before it imports the kernel module (Triton decides when the kernels are
decorated; reloaded if something imported it earlier without the interpreter) and leaves it set,
because the interpreter reads it again while running (no other test module uses Triton). With a GPU the
same tests run the compiled kernels on CUDA tensors; the @pytest.mark.gpu tests add larger shapes,
autotuning and CUDA-graph capture. The interpreter cannot run the inline PTX decode, so
``test_decode_ptx_program`` runs the PTX text through a small emulator instead.
"""
import dataclasses
import importlib
import os
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from specpilot.w12 import W12Tensor, bitwise_equal, decode, encode
from tests.unit.w12_data import (FINITE_EDGE, acts, bits, check_close, make_weight, replayed,
                                  same_bits)

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"
if not CUDA:
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")
from specpilot.w12 import kernel as K  # noqa: E402
from specpilot.w12.linear import W12Linear, convert_model_linears  # noqa: E402

if not CUDA and not K.INTERPRET:
    K = importlib.reload(K)



pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # NaN/Inf
SHAPES = [(64, 64), (96, 160), (70, 150)]   # (N, K); 150 pads to 160, 70 rows = partial tiles


# --------------------------------------------------------------------------------------------
# escape index and decode
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("idx_rows", [K.IDX_ROWS, 64, 256])
def test_escape_index_groups_every_escape(idx_rows):
    """Every escape once, in its (idx_rows-row block, column group) bucket; kent's top byte is
    its row % 256 (read unsigned: rows 128-255 set the sign bit of the int32)."""
    w = encode(make_weight(300, 1100, 0, n_edges=300))
    koff, kent, kval = K.escape_index(w, idx_rows)
    rows, cols, vals = K.escape_coords(w)
    half = w.L.shape[1] // 2
    G = -(-half // K.GROUP)
    assert koff.numel() == -(-300 // idx_rows) * G + 1 and kent.dtype == torch.int32
    assert int(koff[0]) == 0 and int(koff[-1]) == w.n_escapes == kent.numel()
    assert bool((koff[1:] >= koff[:-1]).all())
    key = torch.repeat_interleave(torch.arange(koff.numel() - 1), (koff[1:] - koff[:-1]).long())
    base = (key // G) * idx_rows
    r = base + ((kent.long() >> 24) & 0xFF) - base % 256
    assert bool((r >= base).all() and (r < base + idx_rows).all())
    c = kent.long() & 0xFFFFFF
    assert bool(((torch.where(c < half, c, c - half) // K.GROUP) == key % G).all())
    got = sorted(zip(r.tolist(), c.tolist(), (kval.long() & 0xFFFF).tolist()))
    assert got == sorted(zip(rows.tolist(), cols.tolist(), vals.tolist()))
    with pytest.raises(ValueError):
        K.escape_index(w, 48)
    # rebuilt from the default index: the same buckets, the same entries in each
    q = K.reindex(K.prepare(w, "cpu"), idx_rows)
    assert q.idx_rows == idx_rows and torch.equal(q.koff, koff)
    assert K.weight_ring(q, 2 * K.weight_bytes(q))[1].idx_rows == idx_rows
    with pytest.raises(ValueError, match="koff"):   # an index that does not fit its idx_rows
        dataclasses.replace(q, idx_rows=idx_rows // 2 if idx_rows > 16 else 64)
    assert sorted(zip(key.tolist(), q.kent.tolist(), q.kval.tolist())) == sorted(
        zip(key.tolist(), kent.tolist(), kval.tolist()))


@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("N,K_", SHAPES)
def test_decode_kernel_bitwise(N, K_, per_row):
    x = make_weight(N, K_, N + K_, per_row=per_row)
    w = encode(x, per_row=per_row)
    assert w.per_row == per_row and w.n_escapes > 0
    got = K.decode_w12_gpu(K.prepare(w, DEV))
    assert bitwise_equal(got.cpu(), x)


def _all_code_planes(hb: int) -> W12Tensor:
    """Planes holding every (L byte, code, sign) combination in both halves, no side escapes."""
    from specpilot.w12.format import pack_h
    rows, half = 16, 256
    L = torch.empty(rows, 2 * half, dtype=torch.uint8)
    L[:, :half] = torch.arange(256, dtype=torch.uint8)
    L[:, half:] = torch.arange(255, -1, -1).to(torch.uint8)
    r = torch.arange(rows).view(-1, 1).expand(rows, half)
    c0, c1 = r, (r * 7 + 3) % 16                       # (sign, code) per half and row
    d = torch.cat([c0 & 7, c1 & 7], 1)
    s = torch.cat([c0 >> 3, c1 >> 3], 1)
    return W12Tensor((rows, 2 * half), L, pack_h(d, s), torch.tensor([hb], dtype=torch.uint8),
                     torch.zeros(2, dtype=torch.int32), torch.zeros(0, dtype=torch.int32))


@pytest.mark.parametrize("hb", [0, 57, 121])
def test_decode_kernel_every_code(hb):
    w = _all_code_planes(hb)
    assert bitwise_equal(K.decode_w12_gpu(K.prepare(w, DEV)).cpu(), decode(w))


def _ptx_run(ptx: str, regs: dict) -> dict:
    """Emulate the straight-line PTX subset used by kernel.DECODE_PTX on uint32 numpy arrays."""
    regs = dict(regs)

    def val(tok):
        tok = tok.strip()
        return regs[tok] if tok in regs else np.uint32(int(tok, 0))

    for stmt in re.split(r"[;\n]", ptx):
        stmt = stmt.strip().strip("{}").strip()
        if not stmt or stmt.startswith(".reg"):
            continue
        op, args = stmt.split(None, 1)
        a = [t.strip() for t in args.split(",")]
        if op == "mov.b32":
            regs[a[0]] = np.uint32(0) + val(a[1])
        elif op == "prmt.b32":
            src = np.stack([(val(a[1]) >> np.uint32(8 * i)) & np.uint32(0xFF) for i in range(4)]
                           + [(val(a[2]) >> np.uint32(8 * i)) & np.uint32(0xFF) for i in range(4)])
            sel = val(a[3])                    # an immediate or a register (per element)
            out = np.uint32(0)
            for i in range(4):
                nib = (sel >> np.uint32(4 * i)) & np.uint32(0xF)
                byte = np.take_along_axis(src, np.broadcast_to(nib & np.uint32(7), src.shape[1:])
                                          [None].astype(np.int64), 0)[0]
                # bit 3: replicate the selected byte's sign bit
                byte = np.where(nib & np.uint32(8), np.where(byte & np.uint32(0x80), np.uint32(0xFF),
                                                             np.uint32(0)), byte)
                out = out | (byte.astype(np.uint32) << np.uint32(8 * i))
            regs[a[0]] = out
        elif op in ("and.b32", "or.b32", "add.u32"):
            f = {"and.b32": np.bitwise_and, "or.b32": np.bitwise_or, "add.u32": np.add}[op]
            regs[a[0]] = f(val(a[1]), val(a[2])).astype(np.uint32)
        elif op == "not.b32":
            regs[a[0]] = np.invert(val(a[1]))
        elif op in ("shl.b32", "shr.b32"):
            sh = np.uint32(int(a[2], 0))
            regs[a[0]] = (val(a[1]) << sh) if op == "shl.b32" else (val(a[1]) >> sh)
        else:
            raise AssertionError(f"unexpected PTX op {op}")
    return regs


def test_decode_ptx_program():
    """DECODE_PTX, emulated, equals the format's decode rule (format.decode) on every
    (L byte, code, sign) combination, in every lane of both halves, for edge bases."""
    g = np.random.default_rng(0)
    n = 1 << 16
    l0, l1 = (g.integers(0, 256, (n, 4), dtype=np.uint32) for _ in range(2))
    h = g.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    l0[:4096] = (np.arange(4096) % 256)[:, None]          # every L byte with every code byte
    h[:4096] = (np.arange(4096) // 16) * np.uint32(0x01010101)
    hb = g.choice(np.array([0, 1, 60, 120, 121], dtype=np.uint32), n)

    out = _ptx_run(K.DECODE_PTX, {"$4": _pack(l0), "$5": _pack(l1), "$6": h,
                                  "$7": hb * np.uint32(0x01010101)})

    def ref(L, d, s):
        hi7 = np.where(d == 7, 0, d + hb[:, None])
        return (s << 15) | (hi7 << 8) | L

    i = np.arange(4, dtype=np.uint32)[None, :]
    col = h[:, None]
    r0 = ref(l0, (col >> (4 * i)) & 7, (col >> (8 * i + 7)) & 1)
    r1 = ref(l1, (col >> (16 + 4 * i)) & 7, (col >> (8 * i + 3)) & 1)
    assert np.array_equal(out["$0"], r0[:, 0] | (r0[:, 1] << 16))
    assert np.array_equal(out["$1"], r0[:, 2] | (r0[:, 3] << 16))
    assert np.array_equal(out["$2"], r1[:, 0] | (r1[:, 1] << 16))
    assert np.array_equal(out["$3"], r1[:, 2] | (r1[:, 3] << 16))


def _pack(a):
    return (a[:, 0] | (a[:, 1] << 8) | (a[:, 2] << 16) | (a[:, 3] << 24)).astype(np.uint32)


def test_decode_ptx_equals_swar_emulation():
    """The PTX program and format.decode_swar (the CPU emulation ``check`` runs) agree with the
    reference decoder on real planes (escapes patched afterwards by both)."""
    from specpilot.w12.format import decode_swar
    w = encode(make_weight(64, 256, 3, per_row=True), per_row=True)
    assert bitwise_equal(decode_swar(w), decode(w))
    half = w.L.shape[1] // 2
    q = half // 4
    L = w.L.numpy().astype(np.uint32)
    l0 = _pack(L[:, :half].reshape(-1, 4))
    l1 = _pack(L[:, half:].reshape(-1, 4))
    h = _pack(w.H.numpy().astype(np.uint32).reshape(-1, 4))
    hb = np.repeat(w.hb.numpy().astype(np.uint32), q) * np.uint32(0x01010101)
    out = _ptx_run(K.DECODE_PTX, {"$4": l0, "$5": l1, "$6": h, "$7": hb})
    lanes = lambda r: np.stack([r & 0xFFFF, r >> 16], -1)  # noqa: E731
    first = np.concatenate([lanes(out["$0"]), lanes(out["$1"])], -1).reshape(64, half)
    second = np.concatenate([lanes(out["$2"]), lanes(out["$3"])], -1).reshape(64, half)
    words = torch.from_numpy(np.concatenate([first, second], 1).astype(np.int32))
    from specpilot.w12.format import _patch_and_finish
    assert bitwise_equal(_patch_and_finish(w, words), decode(w))


# --------------------------------------------------------------------------------------------
# GEMMs
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("N,K_", SHAPES)
@pytest.mark.parametrize("M", [1, 3, 17])
def test_w12_matmul_matches_torch(M, N, K_, per_row):
    x = make_weight(N, K_, 7 * N + K_, per_row=per_row)
    w = encode(x, per_row=per_row)
    a = acts(M, K_, M)
    y = K.w12_matmul(a.to(DEV), K.prepare(w, DEV))
    assert y.shape == (M, N) and y.dtype == torch.bfloat16
    check_close(y, a, x)


CONFIGS = [
    K.INTERPRETER_CONFIG,                                          # split-K 2
    K.GemmConfig(16, 64, 32, split_k=1, num_stages=2),
    K.GemmConfig(32, 32, 64, split_k=3, num_stages=2),             # BN < 64-row escape block
    K.GemmConfig(16, 128, 32, split_k=1, num_warps=8, num_stages=2),  # two escape row blocks
    K.GemmConfig(16, 64, 32, split_k=3, num_stages=3, carry=False),   # decoded in place
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"m{c.block_m}n{c.block_n}k{c.block_k}s{c.split_k}c{int(c.carry)}")
@pytest.mark.parametrize("per_row", [False, True])
def test_reproducible_equals_bf16_kernel(cfg, per_row):
    N, K_ = 136, 300                  # 3 escape row blocks, the last partial; K padded
    x = make_weight(N, K_, 3, per_row=per_row, n_edges=40)
    w = encode(x, per_row=per_row)
    p = K.prepare(w, DEV)
    for M in (1, 17):
        a = acts(M, K_, M).to(DEV)
        y16 = K.bf16_matmul(a, x.to(DEV), config=cfg)
        for q in (p, dataclasses.replace(p, tc=None)):   # the GEMM's 64-row index, the 16-row one
            assert same_bits(K.w12_matmul(a, q, reproducible=True, config=cfg), y16), (M, cfg)
        check_close(y16, a.cpu(), x)


def test_fast_mode_equals_reproducible_without_side_escapes():
    g = torch.Generator().manual_seed(5)
    x = ((torch.rand(96, 160, generator=g) + 1) * 0.01 * torch.randn(96, 160, generator=g).sign()
         ).bfloat16()                                  # two binades: no escapes ...
    x.view(-1)[torch.randperm(x.numel(), generator=g)[:30]] = bits([0x0000, 0x8000] * 15)
    w = encode(x)                                      # ... and +-0 need no side entries
    assert w.n_escapes == 0
    p, a = K.prepare(w, DEV), acts(5, 160, 5).to(DEV)
    y = K.w12_matmul(a, p, config=K.INTERPRETER_CONFIG)
    assert same_bits(y, K.w12_matmul(a, p, reproducible=True, config=K.INTERPRETER_CONFIG))
    assert same_bits(y, K.bf16_matmul(a, x.to(DEV), config=K.INTERPRETER_CONFIG))


@pytest.mark.parametrize("cfg", [
    K.GemmConfig(16, 64, 32, split_k=1, num_stages=2, esc_pre=16),
    K.GemmConfig(16, 32, 64, split_k=2, num_stages=2, esc_pre=64),
    K.GemmConfig(16, 64, 32, split_k=3, num_stages=3, carry=False, esc_pre=128)],
    ids=lambda c: f"n{c.block_n}s{c.split_k}c{int(c.carry)}x{c.esc_pre}")
def test_fast_mode_escapes_read_before_the_loop(cfg):
    """esc_pre: the escape index range and the first entries loaded before the main loop, the
    rest after it; a weight with hundreds of finite escapes per 16-row block of the index, so
    that both parts run. Reproducible mode ignores esc_pre (its escapes are patched in)."""
    N, K_ = 136, 320
    x = make_weight(N, K_, 12, edges=FINITE_EDGE, n_edges=11000)
    p = K.prepare(encode(x), DEV)
    per_block = torch.diff(p.koff.cpu()).view(9, -1).sum(1)   # 16-row blocks, the last: 8 rows
    assert p.idx_rows == 16 and int(per_block[:8].min()) > cfg.esc_pre * cfg.split_k
    for M in (1, 17):
        a = acts(M, K_, M).to(DEV)
        for q in (p, dataclasses.replace(p, tc=None)):   # the GEMM's 64-row index, the 16-row one
            check_close(K.w12_matmul(a, q, config=cfg), a.cpu(), x)
            assert same_bits(K.w12_matmul(a, q, reproducible=True, config=cfg),
                             K.bf16_matmul(a, x.to(DEV), config=cfg))


def test_gemm_configs():
    for M, N, K_ in ((1, 5120, 17408), (16, 34816, 5120), (64, 248320, 5120)):
        cands = K.candidate_configs(M, N, K_)
        assert len(set(cands)) == len(cands)
        assert {c for c in cands if c.esc_pre} == {
            dataclasses.replace(c, esc_pre=K.ESC_PRE_CAND) for c in cands
            if not c.esc_pre and c.block_n == 64}
        assert not any(c.esc_pre for c in K.candidate_configs(M, N, K_, kind="bf16"))
    with pytest.raises(ValueError):
        K.GemmConfig(16, 512, 64)   # kent keeps row % 256
    with pytest.raises(ValueError):
        K.GemmConfig(16, 64, 64, esc_pre=24)


def test_split_k_counters_return_to_zero():
    x = make_weight(96, 320, 9)
    p, a = K.prepare(encode(x), DEV), acts(3, 320, 3).to(DEV)
    cfg = K.GemmConfig(16, 32, 32, split_k=4)
    for _ in range(2):  # a second call relies on the counters the first one reset
        check_close(K.w12_matmul(a, p, config=cfg), a.cpu(), x)
    assert all(int(buf.abs().sum()) == 0 for buf in K._LOCKS.values())


def test_split_k_counters_outgrown_stay_alive(monkeypatch):
    """A launch needing more counters gets a larger buffer, and the old one is kept: a CUDA graph
    captured with it keeps its address, and freed, that memory would go to another tensor which
    the graph's replays then count into."""
    import gc
    import weakref

    monkeypatch.setattr(K, "_LOCKS", {})
    monkeypatch.setattr(K, "_OUTGROWN", [])
    dev = torch.device("cpu")
    small = K._locks(dev, 8)
    assert K._locks(dev, 100) is small and small.numel() == 1 << 14
    ref = weakref.ref(small)
    del small
    big = K._locks(dev, (1 << 14) + 1)
    gc.collect()
    assert big.numel() == (1 << 14) + 1 and ref() is not None and K._locks(dev, 8) is big


@pytest.mark.gpu
def test_gpu_graph_survives_outgrown_split_k_counters():
    """A CUDA graph with a split-K W12 launch, captured; then a launch needs more counters than
    the buffer holds (the GEMV tuner's lm_head candidates need 31040 on Qwen3.8-27B, 25256 on
    Muse-Glimmer-30B: more than the first buffer's 16384, session 40) and a new tensor takes
    freed memory. Replays must still use counters of their own: the new tensor unchanged and
    the graph's output right. (With the outgrown buffer freed, the tensor could take its block;
    the replays would count into it, and their tickets, starting from its values, skip the
    reduction: the likely way W12 `stock` failed once its graphs were captured and the first
    prefill tuned the lm_head's GEMV, docs/w12.md.)"""
    x = make_weight(96, 320, 19)
    p, a = K.prepare(encode(x), DEV), acts(3, 320, 5).to(DEV)
    cfg = K.GemmConfig(16, 32, 32, split_k=4)
    K.w12_matmul(a, p, config=cfg)   # counters exist before the capture
    small = K._LOCKS[str(a.device)]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = K.w12_matmul(a, p, config=cfg)
    K._locks(a.device, small.numel() + 1)   # outgrown
    del small
    # tensors of the old one's size: a freed block of that size would go to the first of them
    others = [torch.full((1 << 14,), 5, dtype=torch.int32, device=DEV) for _ in range(4)]
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        check_close(y, a.cpu(), x)
    assert all(bool((t == 5).all()) for t in others)


def test_bf16_matmul_matches_torch():
    x = make_weight(70, 150, 11, n_edges=0)
    a = acts(3, 150, 2)
    check_close(K.bf16_matmul(a.to(DEV), x.to(DEV)), a, x)


def test_weight_ring_copies_planes_and_escape_index():
    """The tuner's ring: every copy of a W12 weight has its own planes, bases and escape
    indexes (none of them L2-resident while a copy is timed), equal to the original's; a copy's
    ``tc`` holds the copy's planes."""
    p = K.prepare(encode(make_weight(64, 128, 3, per_row=True, n_edges=20)), DEV)
    ring = K.weight_ring(p, target_bytes=4 * K.weight_bytes(p))
    assert len(ring) == 4 and ring[0] is p
    fields = ("L", "H", "hb", "koff", "kent", "kval")
    for q in ring[1:]:
        for f in fields:
            assert torch.equal(getattr(q, f), getattr(p, f))
            assert torch.equal(getattr(q.tc, f), getattr(p.tc, f))
        assert q.tc.L is q.L and q.tc.idx_rows == K.TC_IDX_ROWS
    ptrs = {getattr(r, f).data_ptr() for r in ring for f in fields if getattr(r, f).numel()}
    assert len(ptrs) == len(ring) * sum(getattr(p, f).numel() > 0 for f in fields)
    tc_ptrs = {getattr(r.tc, f).data_ptr() for r in ring for f in ("koff", "kent", "kval")}
    assert len(tc_ptrs) == 3 * len(ring) and not tc_ptrs & ptrs


def test_gemm_reads_its_own_escape_index():
    """``prepare`` gives the planes a second index over TC_IDX_ROWS-row blocks (``.tc``) that the
    tensor-core GEMM reads, while the GEMV reads the 16-row one: emptying either index drops the
    escapes of that kernel only. ``tc`` must share the planes; ``reindex`` drops it."""
    from specpilot.w12 import gemv as G
    N, K_ = 136, 320
    x = make_weight(N, K_, 12, edges=FINITE_EDGE, n_edges=3000)
    p = K.prepare(encode(x), DEV)
    assert p.idx_rows == K.IDX_ROWS and p.tc.idx_rows == K.TC_IDX_ROWS == 64
    assert p.tc.L is p.L and p.tc.H is p.H and p.tc.hb is p.hb and p.tc.tc is None
    assert torch.equal(K.reindex(p, 64).koff, p.tc.koff) and K.reindex(p, 64).tc is None

    def emptied(q):
        return dataclasses.replace(q, koff=torch.zeros_like(q.koff), kent=q.kent[:0],
                                   kval=q.kval[:0], tc=None)

    a = acts(1, K_, 1).to(DEV)
    cfg = K.GemmConfig(16, 64, 32, split_k=2, num_stages=2)
    good = K.w12_matmul(a, p, config=cfg)
    check_close(good, a.cpu(), x)
    no_tc_escapes = dataclasses.replace(p, tc=emptied(p.tc))
    assert not same_bits(K.w12_matmul(a, no_tc_escapes, config=cfg), good)
    gcfg = G.INTERPRETER_CONFIG if not CUDA else None
    assert same_bits(G.w12_gemv(a, no_tc_escapes, config=gcfg), G.w12_gemv(a, p, config=gcfg))
    no_gemv_escapes = dataclasses.replace(emptied(p), tc=p.tc)
    assert same_bits(K.w12_matmul(a, no_gemv_escapes, config=cfg), good)
    with pytest.raises(ValueError, match="same planes"):
        dataclasses.replace(p, tc=dataclasses.replace(p.tc, L=p.L.clone()))


def test_rejects_bad_inputs():
    p = K.prepare(encode(make_weight(64, 64, 1)), DEV)
    with pytest.raises(ValueError):
        K.w12_matmul(torch.zeros(2, 32, dtype=torch.bfloat16, device=DEV), p)
    with pytest.raises(ValueError):
        K.w12_matmul(torch.zeros(2, 64, dtype=torch.float32, device=DEV), p)
    with pytest.raises(ValueError):
        K.GemmConfig(16, 64, 48)
    empty = torch.zeros(0, 64, dtype=torch.bfloat16, device=DEV)
    assert K.w12_matmul(empty, p).shape == (0, 64)


# --------------------------------------------------------------------------------------------
# W12Linear (CPU reference path)
# --------------------------------------------------------------------------------------------

def test_w12linear_cpu_equals_linear():
    lin = nn.Linear(300, 70, bias=True).bfloat16()
    with torch.no_grad():
        lin.weight.copy_(make_weight(70, 300, 4, edges=FINITE_EDGE, n_edges=8))
    m = W12Linear.from_linear(lin)
    assert m is not None and m.w12_esc.numel() > 0
    x = torch.randn(2, 5, 300).bfloat16()
    assert same_bits(m(x), lin(x))
    assert same_bits(m(x), F.linear(x, decode(m.w12_tensor()), lin.bias))
    assert set(m.state_dict()) == {"bias", "w12_L", "w12_H", "w12_hb", "w12_esc_off", "w12_esc"}
    with pytest.raises(RuntimeError):
        m(torch.zeros(1, 300, dtype=torch.bfloat16, device="meta"))


class _Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(50, 64)
        self.norm = nn.LayerNorm(64)
        self.q_proj = nn.Linear(64, 96, bias=True)
        self.down_proj = nn.Linear(96, 64, bias=False)
        self.wild = nn.Linear(64, 64, bias=False)      # escapes everywhere: stays bf16
        self.fp32 = nn.Linear(64, 64).float()
        self.lm_head = nn.Linear(64, 50, bias=False)   # tied to the embedding
        self.lm_head.weight = self.embed_tokens.weight

    def forward(self, ids):
        h = self.norm(self.embed_tokens(ids))
        h = self.down_proj(self.q_proj(h)) + self.wild(h)
        h = self.fp32(h.float()).bfloat16()
        return self.lm_head(h)


def test_convert_model_linears():
    torch.manual_seed(0)
    model = _Tiny()
    model.fp32.float()
    for mod in (model.embed_tokens, model.norm, model.q_proj, model.down_proj, model.wild):
        mod.bfloat16()
    with torch.no_grad():
        e = torch.randint(-30, 30, (64, 64)).float()
        model.wild.weight.copy_((torch.rand(64, 64) - 0.5) * torch.pow(2.0, e))
    ids = torch.tensor([1, 5, 7, 49])
    before = model(ids)
    report = convert_model_linears(model)
    assert report["converted"] == 2 and report["kept"] == 3, report
    assert isinstance(model.q_proj, W12Linear) and isinstance(model.down_proj, W12Linear)
    assert type(model.wild) is nn.Linear and type(model.fp32) is nn.Linear
    assert report["layers"]["lm_head"] == "kept: tied weight"
    assert same_bits(model(ids), before)


# --------------------------------------------------------------------------------------------
# GPU only
# --------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_autotune_graph_and_large_m(monkeypatch):
    monkeypatch.delenv("SPECPILOT_W12_TUNE_FILE", raising=False)
    N, K_ = 1536, 2048
    x = make_weight(N, K_, 21, n_edges=100)
    p = K.prepare(encode(x), "cuda")
    a = acts(4, K_, 4).cuda()
    cfg = K.autotune("w12", a, p, candidates=K.candidate_configs(4, N, K_)[:2])
    assert len(K.weight_ring(p)) >= 2 and K.weight_bytes(p) < K.weight_bytes(x)
    assert K.get_config("w12", a, p) == cfg
    check_close(K.w12_matmul(a, p), a.cpu(), x)
    y_eager = K.w12_matmul(a, p, config=cfg)   # deterministic split-K: the graph's output equals it
    assert same_bits(replayed(lambda: K.w12_matmul(a, p, config=cfg)), y_eager)
    big = acts(300, K_, 9).cuda()      # decode + torch.matmul path
    assert same_bits(K.w12_matmul(big, p), torch.matmul(big, K.decode_w12_gpu(p).t()))


@pytest.mark.gpu
def test_gpu_w12linear(monkeypatch):
    lin = nn.Linear(512, 384, bias=True).bfloat16()
    m = W12Linear.from_linear(lin).cuda()
    x = torch.randn(3, 7, 512).bfloat16()
    y = m(x.cuda())
    assert y.shape == (3, 7, 384)
    ref = F.linear(x.double(), lin.weight.double(), lin.bias.double())
    assert float((y.double().cpu() - ref).abs().max()) <= 2 ** -6 * float(ref.abs().max())
    monkeypatch.setattr(K, "HAS_TRITON", False)
    with pytest.raises(RuntimeError, match="needs Triton"):
        m(x.cuda())
