"""CUDA-core W12 GEMV (specpilot/w12/gemv.py): w12_gemv / bf16_gemv for M <= 8.

As in test_w12_kernel.py: without a GPU the kernels run in the Triton interpreter on CPU tensors
(this module sets TRITON_INTERPRET=1 before it imports the kernel modules, reloads them if
something imported them earlier without the interpreter, and leaves it set, because the
interpreter reads it again while running). With a GPU the same tests run the compiled kernels on
CUDA tensors, and the @pytest.mark.gpu test adds a larger shape, the tuning candidates and
CUDA-graph capture. The interpreter cannot run inline PTX (the decode and the fp32 widening), so
``test_gemv_compiles_for_sm90`` compiles the kernel for an H100/H200 without a GPU (Triton's
compiler and bundled ptxas) and checks that it builds without register spills.
"""
import dataclasses
import importlib
import json
import os
import re

import pytest
import torch

from specpilot.w12 import encode
from tests.unit.w12_data import (FINITE_EDGE, acts, bits, check_close, make_weight, replayed,
                                  same_bits)

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"
INTERP = not CUDA and __name__ != "__main__"   # __main__: the sm_90 compile subprocess
if INTERP:
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")
from specpilot.w12 import kernel as K  # noqa: E402
from specpilot.w12 import gemv as G  # noqa: E402

if INTERP and not K.INTERPRET:
    K = importlib.reload(K)
if INTERP and (not G.INTERPRET or G._decode_tiles is not K._decode_tiles):
    G = importlib.reload(G)   # bound to a kernel module imported without the interpreter



def cfg(bn, bk, split=1, bm=1, acc=G.ACC_ELEMENTWISE, warps=1, stages=1, ahead=0, esc_pre=0,
        esc_late=0):
    return G.GemvConfig(block_n=bn, block_k=bk, split_k=split, num_warps=warps,
                        num_stages=stages, block_m=bm, acc=acc, ahead=ahead, esc_pre=esc_pre,
                        esc_late=esc_late)


pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # NaN/Inf
E, R = G.ACC_ELEMENTWISE, G.ACC_REDUCE

# (N, K, M, per-row base, config or None = the wrapper's default); K = 200 pads to 224 (and
# 96 with block_k 64 leaves a partial step): masked tails; N = 130: a partial tile, three escape
# row blocks; block_n 128: two escape row blocks in one program; block_m < M: several row blocks;
# ahead: the register look-ahead (one step per split range, a partial last step, split ranges
# of unequal length); ahead 2: the first step loaded early and peeled off the loop (split ranges
# of one step, a partial step); esc_pre: the escape index read before the main loop (16: more
# entries than that per program, so the chunks after the loop run too), esc_late: in its first
# step
CASES = [
    (64, 96, 1, False, None),
    (130, 200, 3, True, cfg(32, 32, split=3, bm=3, acc=R)),
    (7, 32, 8, False, cfg(8, 32, bm=8)),
    (1, 96, 2, False, cfg(4, 32, split=2, bm=2, acc=R)),
    (64, 200, 4, True, cfg(64, 64, bm=4)),
    (130, 32, 1, False, cfg(128, 32, acc=R)),
    (7, 200, 5, False, cfg(8, 64, split=2, bm=2)),
    (64, 96, 2, True, cfg(16, 64, bm=2, acc=R, stages=2)),
    (130, 200, 1, True, cfg(32, 32, split=3, ahead=1)),
    (64, 96, 2, False, cfg(16, 32, split=3, bm=2, ahead=1)),
    (7, 200, 3, False, cfg(8, 64, bm=3, acc=R, ahead=1)),
    (130, 200, 1, True, cfg(32, 32, split=7, ahead=2)),
    (64, 96, 2, False, cfg(16, 64, split=2, bm=2, ahead=2, esc_pre=16)),
    (7, 200, 3, False, cfg(8, 64, bm=3, acc=R, ahead=2)),
    (130, 200, 1, True, cfg(32, 32, split=3, esc_pre=16)),
    (64, 96, 3, False, cfg(16, 64, bm=3, acc=R, esc_pre=64)),
    (7, 200, 2, False, cfg(8, 64, split=2, bm=2, esc_pre=128)),
    (130, 200, 2, True, cfg(32, 32, split=3, bm=2, esc_pre=16, esc_late=1)),
    (64, 96, 1, False, cfg(16, 64, acc=R, esc_pre=64, esc_late=1)),
]


@pytest.mark.parametrize("N,K_,M,per_row,config", CASES,
                         ids=[f"n{c[0]}k{c[1]}m{c[2]}{'row' if c[3] else ''}-"
                              f"{c[4].short if c[4] else 'default'}" for c in CASES])
def test_gemv_matches_torch(N, K_, M, per_row, config):
    x = make_weight(N, K_, 7 * N + K_ + M, per_row=per_row, n_edges=min(12, N * K_ // 8))
    w = encode(x, per_row=per_row)
    assert w.per_row == per_row and w.n_escapes > 0
    a = acts(M, K_, M)
    check_close(G.w12_gemv(a.to(DEV), K.prepare(w, DEV), config=config), a, x)
    check_close(G.bf16_gemv(a.to(DEV), x.to(DEV), config=config), a, x)


@pytest.mark.parametrize("acc", [E, R])
def test_w12_equals_bf16_gemv_without_side_escapes(acc):
    """No side escapes (two binades plus +-0): both kernels sum the same products in the same
    order, so the outputs are bitwise equal (the decode equals the bf16 load)."""
    g = torch.Generator().manual_seed(5)
    x = ((torch.rand(40, 160, generator=g) + 1) * 0.01 * torch.randn(40, 160, generator=g).sign()
         ).bfloat16()
    x.view(-1)[torch.randperm(x.numel(), generator=g)[:30]] = bits([0x0000, 0x8000] * 15)
    w = encode(x)
    assert w.n_escapes == 0
    p, a = K.prepare(w, DEV), acts(3, 160, 5).to(DEV)
    c = cfg(16, 32, split=2, bm=3, acc=acc)
    y = G.w12_gemv(a, p, config=c)
    assert same_bits(y, G.bf16_gemv(a, x.to(DEV), config=c))
    check_close(y, a.cpu(), x)


def test_split_k_deterministic_and_counters_reset():
    x = make_weight(64, 320, 9, n_edges=12)
    p, a = K.prepare(encode(x), DEV), acts(2, 320, 3).to(DEV)
    c = cfg(32, 32, split=4, bm=2)
    y1 = G.w12_gemv(a, p, config=c)
    y2 = G.w12_gemv(a, p, config=c)   # relies on the counters the first call reset
    assert same_bits(y1, y2)
    check_close(y1, a.cpu(), x)
    assert all(int(buf.abs().sum()) == 0 for buf in K._LOCKS.values())


@pytest.mark.parametrize("split,bm,acc", [(1, 1, E), (3, 2, R), (5, 3, E)])
def test_first_step_peeled_is_the_plain_loop_bit_for_bit(split, bm, acc):
    """ahead 2 (the first K-step's weights loaded before the PDL wait, that step peeled off the
    loop) adds the same products in the same order as the plain loop: equal bits, both kinds
    (split 5 of 7 steps: ranges of one and two steps)."""
    x = make_weight(48, 448, 40 + split, n_edges=40)
    p, a, xd = K.prepare(encode(x), DEV), acts(bm, 448, 3 + bm).to(DEV), x.to(DEV)
    plain = cfg(16, 32, split=split, bm=bm, acc=acc, esc_pre=16)
    first = dataclasses.replace(plain, ahead=2)
    y = G.w12_gemv(a, p, config=first)
    assert same_bits(y, G.w12_gemv(a, p, config=plain))
    assert same_bits(G.bf16_gemv(a, xd, config=first), G.bf16_gemv(a, xd, config=plain))
    check_close(y, a.cpu(), x)


@pytest.mark.parametrize("esc_pre,late", [(16, 0), (64, 0), (16, 1)])
@pytest.mark.parametrize("bm,split", [(1, 1), (2, 2), (3, 1)])
def test_escapes_read_before_the_loop(esc_pre, late, bm, split):
    """esc_pre > 0 on a weight with hundreds of finite escapes per 16-row block of the index
    (every K-range of every program has more than esc_pre entries, so the chunks after the
    main loop run as well; split 2: so do the second row block's): within fp32 summation order
    of torch and the same results as esc_pre 0."""
    x = make_weight(128, 320, 31 + bm, edges=FINITE_EDGE, n_edges=8000)
    w = encode(x)
    p, a = K.prepare(w, DEV), acts(bm, 320, 7 + bm).to(DEV)
    per_block = torch.diff(p.koff.cpu()).view(8, -1).sum(1)   # entries per 16-row block
    assert int(per_block.min()) > 2 * esc_pre * split
    c = cfg(32, 64, split=split, bm=bm, esc_pre=esc_pre, esc_late=late)
    y = G.w12_gemv(a, p, config=c)
    check_close(y, a.cpu(), x)
    y0 = G.w12_gemv(a, p, config=dataclasses.replace(c, esc_pre=0, esc_late=0))
    check_close(y0, a.cpu(), x)
    assert bool(torch.isfinite(y.float()).all())


@pytest.mark.parametrize("idx_rows", [16, 64])
@pytest.mark.parametrize("bn,split,esc_pre", [(8, 1, 0), (8, 2, 16), (16, 1, 16), (16, 2, 0),
                                              (64, 1, 0), (64, 2, 16)])
def test_escape_index_row_blocks(idx_rows, bn, split, esc_pre):
    """Programs of fewer, as many or more rows than the index's row block, with and without
    split-K (one contiguous range, or one per row block) and esc_pre, on N = 88 (the last
    program partial): every escape is added once, the same for either index."""
    x = make_weight(88, 256, 40 + bn, edges=FINITE_EDGE, n_edges=1500)
    p, a = K.prepare(encode(x), DEV, idx_rows), acts(2, 256, bn).to(DEV)
    assert p.kent.numel() > 300
    check_close(G.w12_gemv(a, p, config=cfg(bn, 32, split=split, bm=2, esc_pre=esc_pre)),
                a.cpu(), x)


def test_configs():
    assert [G.gemv_supported(m) for m in (0, 1, 8, 9)] == [False, True, True, False]
    for M in (1, 2, 3, 4, 8):
        for N, K_ in ((5120, 17408), (5120, 6144), (34816, 5120), (248320, 5120), (96, 100)):
            d = G.gemv_default_config(M, N, K_)
            assert d.block_m == M
            cands = G.gemv_candidates(M, N, K_)
            assert 4 <= len(cands) <= 36 and len(set(cands)) == len(cands)
            assert all(c.block_m == M and c.block_n <= 32 for c in cands)
            # each W12 tiling with and without the escape index read before the loop
            assert ({dataclasses.replace(c, esc_pre=0) for c in cands if c.esc_pre}
                    == {c for c in cands if not c.esc_pre and c.num_stages == 1})
            assert {c.esc_pre for c in cands} == {0, G.ESC_PRE_CAND}
            assert all(c.num_stages == 1 for c in cands if c.esc_pre)
            assert not any(c.esc_pre for c in G.gemv_candidates(M, N, K_, kind="bf16"))
            assert {c.acc for c in cands} == {E, R}
            bf = G.gemv_candidates(M, N, K_, kind="bf16")
            assert not any(c.ahead == 1 for c in cands)   # the look-ahead: bf16 candidates only
            assert any(c.ahead == 1 for c in bf) == (M <= 2)
            # the first step before the PDL wait: both kinds, M <= 2
            assert any(c.ahead == 2 for c in cands) == any(c.ahead == 2 for c in bf) == (M <= 2)
            if N == 5120:   # narrow layers: >= 2 programs per SM (132 SMs) at the first split
                assert all(-(-N // c.block_n) * c.split_k >= 2 * 132 for c in cands[:4])
    with pytest.raises(ValueError):
        G.GemvConfig(block_k=48)
    with pytest.raises(ValueError):
        G.GemvConfig(block_m=9)
    with pytest.raises(ValueError):
        G.GemvConfig(num_stages=2, ahead=1)   # the look-ahead is a form of the plain loop
    with pytest.raises(ValueError):
        G.GemvConfig(num_stages=2, ahead=2)
    with pytest.raises(ValueError):
        G.GemvConfig(ahead=3)
    with pytest.raises(ValueError):
        G.GemvConfig(ahead=2, esc_pre=64, esc_late=1)   # its first step is peeled off the loop
    with pytest.raises(ValueError):
        G.GemvConfig(block_n=4, block_k=64, num_warps=4)   # 2 pair columns per thread
    with pytest.raises(ValueError):
        G.GemvConfig(acc=2)
    with pytest.raises(ValueError):
        G.GemvConfig(esc_pre=48)
    with pytest.raises(ValueError):
        G.GemvConfig(block_n=512, block_k=32)   # escape entries keep row % 256
    assert G.GemvConfig(esc_pre=64).short.endswith("ex64")
    assert G.GemvConfig(esc_pre=64, esc_late=1).short.endswith("ex64l")
    with pytest.raises(ValueError):
        G.GemvConfig(esc_late=1)   # nothing to load late without esc_pre


def test_config_label_round_trip():
    assert G.GemvConfig(ahead=2, esc_pre=64).short.endswith("efx64")
    for cfg in (G.GemvConfig(), G.GemvConfig(block_n=8, block_k=256, num_warps=2, ahead=1),
                G.GemvConfig(block_n=16, block_k=512, num_warps=8, ahead=2, esc_pre=64),
                G.GemvConfig(block_n=32, block_k=128, split_k=4, acc=G.ACC_REDUCE, esc_pre=64,
                             esc_late=1), G.GemvConfig(block_m=8, num_stages=3)):
        assert G.GemvConfig.from_short(cfg.short) == cfg
    for bad in ("n16k", "n16k256s1w4p1m1q", "n16k256s1w4p1m1ex48", "n16k256s1w3p1m1e"):
        with pytest.raises(ValueError):
            G.GemvConfig.from_short(bad)


def test_rejects_bad_inputs():
    x = make_weight(16, 64, 1, n_edges=12)
    p = K.prepare(encode(x), DEV)
    z = lambda m, k, dt=torch.bfloat16: torch.zeros(m, k, dtype=dt, device=DEV)  # noqa: E731
    with pytest.raises(ValueError, match="at most 8"):
        G.w12_gemv(z(9, 64), p)
    with pytest.raises(ValueError, match="at most 8"):
        G.bf16_gemv(z(9, 64), x.to(DEV))
    with pytest.raises(ValueError):
        G.w12_gemv(z(2, 32), p)                       # wrong K
    with pytest.raises(ValueError):
        G.w12_gemv(z(2, 64, torch.float32), p)        # not bf16
    with pytest.raises(ValueError):
        G.w12_gemv(torch.zeros(64, dtype=torch.bfloat16, device=DEV), p)   # not 2-D
    with pytest.raises(ValueError):
        G.bf16_gemv(z(2, 64), x.float().to(DEV))      # weight not bf16
    with pytest.raises(TypeError):
        G.w12_gemv(z(2, 64), p, config=K.INTERPRETER_CONFIG)   # a GEMM config
    assert G.w12_gemv(z(0, 64), p).shape == (0, 16)
    assert G.bf16_gemv(z(0, 64), x.to(DEV)).shape == (0, 16)


# --------------------------------------------------------------------------------------------
# tuned configs in $SPECPILOT_W12_TUNE_FILE (shared with the GEMM's), on CPU tensors: the GPU's
# name and SM count are faked and kernel.fastest (the timing) is replaced
# --------------------------------------------------------------------------------------------

TN, TK, TM = 64, 96, 2   # the tuned shape


@pytest.fixture
def tune_file(monkeypatch, tmp_path):
    """A fresh "process" (empty tune cache, file not read yet) on a fake GPU, with
    $SPECPILOT_W12_TUNE_FILE set to a file that does not exist yet; returns its path."""
    monkeypatch.setattr(K, "_TUNED", {})
    monkeypatch.setattr(K, "_TUNE_FILE_LOADED", False)
    monkeypatch.setattr(K, "_gpu_name", lambda index: "Fake_GPU")
    monkeypatch.setattr(K, "_num_sms", lambda device: 132)
    monkeypatch.setattr(K, "autotune_enabled", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    path = tmp_path / "tune.json"
    monkeypatch.setenv("SPECPILOT_W12_TUNE_FILE", str(path))
    return path


def _new_process():
    K._TUNED.clear()
    K._TUNE_FILE_LOADED = False   # (restored by the fixture's monkeypatch)


def _tune_with(monkeypatch, pick):
    """Make kernel.fastest return pick(candidates) without timing; returns the list of picks."""
    picked = []

    def fastest(cands, make_fn, n, what):
        picked.append(pick(cands))
        return picked[-1]
    monkeypatch.setattr(K, "fastest", fastest)
    return picked


def _no_tuning(monkeypatch):
    def fail(*args):
        raise AssertionError("tuned again instead of using the tune file")
    monkeypatch.setattr(K, "fastest", fail)


def _weight_and_acts():
    x = make_weight(TN, TK, 3, n_edges=12)
    return K.prepare(encode(x), "cpu"), acts(TM, TK, 1), x


def test_gemv_tune_file_read_back_without_retuning(tune_file, monkeypatch):
    p, a, x = _weight_and_acts()
    picked = _tune_with(monkeypatch, lambda cands: cands[-1])
    c = G._tuned_config(a, p, TN, TK, True)        # first process: tunes, writes the file
    assert picked == [c] and c != G.gemv_default_config(TM, TN, TK)
    key = G._tune_key(a, TN, TK, True)
    assert key == f"gemv-w12|Fake_GPU|m{TM}|n{TN}|k{TK}"
    assert json.loads(tune_file.read_text()) == {key: dataclasses.asdict(c)}

    _new_process()
    _no_tuning(monkeypatch)
    assert G._tuned_config(a, p, TN, TK, True) == c  # read from the file, not tuned
    assert K._TUNED == {key: c}
    # the tuned config runs (on the GPU where there is one: the tune step above is CPU-side)
    check_close(G.w12_gemv(a.to(DEV), K.prepare(encode(x), DEV), config=K._TUNED[key]), a, x)


def test_gemm_and_gemv_entries_for_one_shape_coexist(tune_file, monkeypatch):
    p, a, _ = _weight_and_acts()
    _tune_with(monkeypatch, lambda cands: cands[1])
    gemm = K.autotune("w12", a, p)                   # process 1 tunes the GEMM
    _new_process()
    gemv = G.gemv_autotune(a, p)    # process 2 the GEMV, same shape (file not read: merged)
    gemm_key, gemv_key = K._tune_key("w12", TM, TN, TK, a.device), G._tune_key(a, TN, TK, True)
    assert isinstance(gemm, K.GemmConfig) and isinstance(gemv, G.GemvConfig)
    assert json.loads(tune_file.read_text()) == {gemm_key: dataclasses.asdict(gemm),
                                                 gemv_key: dataclasses.asdict(gemv)}

    _new_process()
    _no_tuning(monkeypatch)
    assert G._tuned_config(a, p, TN, TK, True) == gemv
    assert K._TUNED == {gemm_key: gemm, gemv_key: gemv}
    assert K.load_tuning(str(tune_file)) == 2


def test_tune_file_without_gemv_entries_still_loads(tune_file, monkeypatch):
    """A file written before the GEMV entries existed (GEMM entries only, same format)."""
    p, a, _ = _weight_and_acts()
    old = {"w12|Fake_GPU|m2|n64|k96": {"block_m": 16, "block_n": 64, "block_k": 64, "split_k": 2,
                                       "num_warps": 4, "num_stages": 2, "carry": True},
           "bf16|Fake_GPU|m128|n64|k96": {"block_m": 64, "block_n": 128, "block_k": 32,
                                          "split_k": 1, "num_warps": 8, "num_stages": 3,
                                          "carry": True}}
    tune_file.write_text(json.dumps(old))
    picked = _tune_with(monkeypatch, lambda cands: cands[0])
    gemv = G._tuned_config(a, p, TN, TK, True)      # no GEMV entry: tuned and added
    assert picked == [gemv]
    assert K._TUNED[K._tune_key("w12", TM, TN, TK, a.device)] == K.GemmConfig(**old[
        "w12|Fake_GPU|m2|n64|k96"])
    # rewritten in the current format (fields added since then at their defaults)
    assert json.loads(tune_file.read_text()) == {**{k: v | {"esc_pre": 0} for k, v in old.items()},
                                                 G._tune_key(a, TN, TK, True):
                                                 dataclasses.asdict(gemv)}


@pytest.mark.parametrize("entry", [{"block_n": 16, "block_x": 1}, {"block_k": 48}, [16, 64]],
                         ids=["unknown-field", "invalid-value", "not-an-object"])
def test_malformed_gemv_entry_names_the_file(tune_file, monkeypatch, entry):
    p, a, _ = _weight_and_acts()
    key = G._tune_key(a, TN, TK, True)
    tune_file.write_text(json.dumps({"w12|Fake_GPU|m2|n64|k96": dataclasses.asdict(
        K.INTERPRETER_CONFIG), key: entry}))
    _no_tuning(monkeypatch)
    with pytest.raises(ValueError, match=re.escape(f"{tune_file}: bad GemvConfig entry '{key}'")):
        G._tuned_config(a, p, TN, TK, True)
    assert K._TUNED == {}   # nothing merged


# --------------------------------------------------------------------------------------------
# compiled for sm_90 without a GPU
# --------------------------------------------------------------------------------------------

def _compile_cases():
    """Runs in a subprocess without TRITON_INTERPRET: {case: (spill bytes, shared bytes)}; the
    tensor-core GEMM's cases are compiled only (spills None)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from specpilot.w12 import gemv
    from tests.unit.sm90 import spills, w12_kernel_signature

    fn = gemv._gemv_kernel
    names = list(fn.arg_names)
    aligned = ["x_ptr", "y_ptr", "ws_ptr", "lock_ptr", "w_ptr", "h_ptr", "hb_ptr", "koff_ptr",
               "kent_ptr", "kval_ptr", "N", "K", "HALF", "stride_xm", "stride_w", "stride_h"]
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in aligned}

    out = {}
    cases = [("w12", gemv.gemv_default_config(m, 5120, 17408), True, False) for m in (1, 2, 4, 8)]
    cands = gemv.gemv_candidates(1, 5120, 17408)
    cases += [("w12", next(c for c in gemv.gemv_candidates(4, 5120, 17408)
                           if c.num_stages > 1), True, True),                 # pipelined
              ("bf16", next(c for c in gemv.gemv_candidates(1, 5120, 17408, kind="bf16")
                            if c.ahead), True, False),                        # look-ahead
              ("bf16", gemv.gemv_default_config(1, 5120, 17408), False, True),
              ("w12", next(c for c in cands if c.esc_pre), True, False),     # escapes early
              ("w12", dataclasses.replace(next(c for c in cands if c.esc_pre), esc_late=1), True,
               False),
              ("w12", next(c for c in cands if c.ahead == 2 and c.esc_pre), True, False),
              ("w12", next(c for c in cands if c.block_k == 512 and c.ahead == 2), True, False),
              ("bf16", next(c for c in gemv.gemv_candidates(1, 5120, 17408, kind="bf16")
                            if c.block_k == 512 and c.ahead == 2), True, False)]
    for kind, c, even_k, per_row in cases:
        w12 = kind == "w12"
        sig = w12_kernel_signature(fn, w12)
        consts = dict(W12=w12, HB_PER_ROW=per_row and w12, USE_SPLIT=c.split_k > 1,
                      EVEN_K=even_k, PTX=True, ACC=c.acc, BM=c.block_m,
                      BMP=1 << (c.block_m - 1).bit_length(), BN=c.block_n, BK=c.block_k,
                      IR=16, NRB=-(-c.block_n // 16), ESC_CH=gemv.ESC_CHUNK,
                      ESC_PRE=c.esc_pre if w12 else 0, ESC_LATE=bool(w12 and c.esc_late),
                      STAGES=c.num_stages, AHEAD=c.ahead, PDL=0)
        sig.update({k: "constexpr" for k in consts})
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32),
                           options=dict(num_warps=c.num_warps, num_stages=1))
        out[f"{kind} {c.short}{' per-row' if per_row else ''}"] = (spills(k.asm["ptx"]),
                                                                   k.metadata.shared)
    # the tensor-core GEMM (kernel._gemm_kernel; it shares _store_out / _esc_entries with the
    # GEMV): compiled for sm_90 in its W12 fast, reproducible and bf16 forms, carried or not
    from specpilot.w12 import kernel

    fn = kernel._gemm_kernel
    names = list(fn.arg_names)
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    # (the GEMM reads the 64-row index, W12Planes.tc; one case on the GEMV's 16-row one)
    for w12, esc, carry, split, pre, ir in (
            (True, 1, True, 4, 0, 64), (True, 1, False, 1, 0, 64), (True, 2, True, 1, 0, 64),
            (False, 0, False, 2, 0, 64), (True, 1, True, 4, 64, 64), (True, 1, False, 1, 64, 64),
            (True, 1, True, 4, 64, 16)):
        c = kernel.default_config(1, 5120, 17408)
        sig = w12_kernel_signature(fn, w12)
        consts = dict(W12=w12, HB_PER_ROW=False, ESC_MODE=esc, USE_SPLIT=split > 1, EVEN_K=True,
                      DOT_F32=False, PTX=True, BM=16, BN=c.block_n, BK=c.block_k,
                      IR=ir, NRB=-(-c.block_n // ir), CARRY=carry,
                      ESC_CH=kernel.ESC_CHUNK,
                      ESC_PRE=pre)
        sig.update({k: "constexpr" for k in consts})
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32),
                           options=dict(num_warps=c.num_warps, num_stages=c.num_stages))
        out[f"gemm w12={w12} esc={esc} carry={carry} split={split} pre={pre} ir={ir}"] = (
            None, k.metadata.shared)
    return out


def test_gemv_compiles_for_sm90():
    from tests.unit.sm90 import run_in_subprocess

    result = run_in_subprocess(__file__)
    assert len(result) == 12 + 7  # 12 GEMV cases, 7 tensor-core GEMM ones (compiled, not checked)
    spilled = {k: v for k, (v, _) in result.items() if v not in (None, 0)}
    assert not spilled, f"register spills (bytes): {spilled}"
    assert all(smem <= G.SMEM_LIMIT + 4096 for k, (_, smem) in result.items()
               if not k.startswith("gemm")), result


# --------------------------------------------------------------------------------------------
# GPU only
# --------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_gemv_large_and_graph():
    N, K_ = 1536, 2048
    x = make_weight(N, K_, 21, n_edges=100)
    p = K.prepare(encode(x), "cuda")
    xc = x.cuda()
    for M in (1, 3, 8):
        a = acts(M, K_, M).cuda()
        check_close(G.w12_gemv(a, p), a.cpu(), x)
        check_close(G.bf16_gemv(a, xc), a.cpu(), x)
        for c in G.gemv_candidates(M, N, K_)[:3] + G.gemv_candidates(M, N, K_)[-2:]:
            check_close(G.w12_gemv(a, p, config=c), a.cpu(), x)
        for c in [c for c in G.gemv_candidates(M, N, K_, kind="bf16") if c.ahead][:2]:
            check_close(G.bf16_gemv(a, xc, config=c), a.cpu(), x)
        for c in [c for c in G.gemv_candidates(M, N, K_) if c.ahead == 2 or c.block_k == 512]:
            y = G.w12_gemv(a, p, config=c)   # the peeled first step adds as the plain loop does
            check_close(y, a.cpu(), x)
            assert same_bits(y, G.w12_gemv(a, p, config=dataclasses.replace(c, ahead=0)))
    a = acts(4, K_, 4).cuda()
    c = dataclasses.replace(G.gemv_default_config(4, N, K_), split_k=4)
    y_eager = G.w12_gemv(a, p, config=c)   # deterministic split-K: the graph's output equals it
    assert same_bits(replayed(lambda: G.w12_gemv(a, p, config=c)), y_eager)


@pytest.mark.gpu
def test_gpu_w12_matmul_takes_the_tuned_gemv_at_small_m(monkeypatch):
    """Fast-mode w12_matmul with M < MMA_MIN_M runs the GEMV with its tuned config (tuned on
    first use, then cached); reproducible mode keeps the tensor-core GEMM."""
    monkeypatch.setattr(K, "_TUNED", {})
    monkeypatch.setattr(K, "_TUNE_FILE_LOADED", True)
    monkeypatch.delenv("SPECPILOT_W12_TUNE_FILE", raising=False)
    N, K_ = 1536, 2048
    x = make_weight(N, K_, 22, n_edges=50)
    p = K.prepare(encode(x), "cuda")
    n_gemv = K.MMA_MIN_M - 1
    for M in range(1, n_gemv + 1):
        a = acts(M, K_, M).cuda()
        y = K.w12_matmul(a, p)
        cfg = K._TUNED[G._tune_key(a, N, K_, True)]
        assert same_bits(y, G.w12_gemv(a, p, config=cfg))
        check_close(y, a.cpu(), x)
    assert len(K._TUNED) == n_gemv   # the GEMV's configs only
    a = acts(1, K_, 1).cuda()
    y = K.w12_matmul(a, p, reproducible=True)   # the tensor-core GEMM, tuned on this call
    cfg = K.get_config("w12", a, p, tune=False)
    assert len(K._TUNED) == n_gemv + 1
    assert cfg == K._TUNED[K._tune_key("w12", 1, N, K_, a.device)]
    assert same_bits(y, K._launch(a, p, cfg, True, 2))


if __name__ == "__main__":
    print(json.dumps(_compile_cases()))
