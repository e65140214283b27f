"""The Gluon tensor-core W12 GEMM for few rows (specpilot/w12/mma.py).

Gluon has no interpreter, so on CPU the kernel is compiled for an H100/H200 (sm_90) in a
subprocess (tests/unit/sm90.py) and its code is checked for what the design relies on: one
mma.sync per 8 activation rows and H word, 16-byte plane loads, register-only layout changes in
the main loop and no spills. The numerics run on the GPU (``gpu`` tests, recorded in
docs/benchmarks/w12.md with ``scripts/gpu_w12_mma_bench.py``)."""

from __future__ import annotations

import json
from dataclasses import replace
import re

import pytest
import torch

from specpilot.w12 import mma
from specpilot.w12.format import encode
from tests.unit.w12_data import (FINITE_EDGE, acts, check_close, check_pdl_modes, make_weight,
                                 same_bits)

SIG = {"x_ptr": "*i32", "x16_ptr": "*bf16", "y_ptr": "*bf16", "ws_ptr": "*fp32",
       "lock_ptr": "*i32", "l_ptr": "*i32", "h_ptr": "*i32", "hb_ptr": "*u8", "koff_ptr": "*i32",
       "kent_ptr": "*i32", "kval_ptr": "*i16", "M": "i32", "N": "i32", "KW": "i32", "HW": "i32",
       "G": "i32", "sxm": "i32", "sym": "i32", "RPS": "i32"}
ALIGNED = ("x_ptr", "x16_ptr", "y_ptr", "ws_ptr", "lock_ptr", "l_ptr", "h_ptr", "hb_ptr",
           "koff_ptr", "kent_ptr", "kval_ptr", "KW", "HW", "sxm", "sym")
CASES = [  # (warps_k, warps_r, ahead, words, NT, per-row base, split-K, PDL, esc_pre, bf16[,
    #          esc_mma])
    (2, 1, 1, 8, 1, False, False, 0, 0, False), (4, 1, 1, 4, 2, False, False, 0, 0, False),
    (2, 1, 1, 4, 2, False, True, 0, 0, False),
    (2, 1, 0, 4, 1, True, False, 3, 0, False), (2, 1, 2, 4, 1, False, False, 0, 0, False),
    (2, 1, 2, 8, 1, False, True, 2, 0, False),
    (2, 1, 2, 8, 1, False, False, 2, 1, False), (2, 1, 1, 4, 2, True, True, 3, 2, False),
    (4, 2, 0, 4, 1, False, False, 0, 4, False),
    # bf16_mma: the same loop on bf16 words
    (2, 1, 2, 8, 1, False, False, 2, 0, True), (2, 1, 1, 4, 2, False, True, 3, 0, True),
    (4, 1, 0, 4, 1, False, False, 0, 0, True),
    # the escapes as tensor-core MMAs before the main loop
    (2, 1, 2, 8, 1, False, False, 2, 0, False, 1), (2, 2, 1, 4, 2, True, True, 3, 0, False, 1)]


def _label(c) -> str:
    cfg = mma.MmaConfig(*c[:4], split=1 + c[6], esc_pre=c[8], esc_mma=c[10] if len(c) > 10 else 0)
    return f"{'bf16 ' if c[9] else ''}{cfg.short} nt{c[4]}"


def _compile_all() -> dict:
    """Runs in the subprocess (sm90.run_in_subprocess): per case, facts about the code."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from tests.unit.sm90 import spills

    out = {}
    for case in CASES:
        wk, wr, ahead, words, nt, per_row, split, pdl, esc_pre, bf16 = case[:10]
        esc_mma = case[10] if len(case) > 10 else 0
        cfg = mma.MmaConfig(wk, wr, ahead, words, split=2 if split else 1, esc_pre=esc_pre,
                            esc_mma=esc_mma)
        P, Q, X, E4 = mma.layouts(cfg)
        QE, EL = mma.esc_mma_layouts(cfg)
        sig = dict(SIG, hb_ptr="*i32" if per_row else "*u8")
        ec = mma.esc_chunk(cfg)
        consts = dict(WK=wk, WR=wr, NT=nt, S=words, AHEAD=ahead, HB_PER_ROW=per_row, ESC=True,
                      USE_SPLIT=split, PDL=pdl, P=P, Q=Q, X=X, E4=E4, EC=ec, EP=ec * esc_pre,
                      E4P=mma.esc_layout(cfg, ec * max(esc_pre, 1)), BF16=False, PB=P,
                      EM=esc_mma, QE=QE, EL=EL)
        if bf16:   # as bf16_mma launches it: the weight's int32 view in every plane argument
            sig.update(h_ptr="*i32", hb_ptr="*i32", koff_ptr="*i32", kent_ptr="*i32",
                       kval_ptr="*i32")
            consts.update(ESC=False, BF16=True, PB=mma.bf16_layout(cfg))
        names = list(sig)
        sig.update({k: "constexpr" for k in consts})
        # the launcher's specialisation of 16-byte-aligned pointers and sizes divisible by 16
        attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in ALIGNED}
        k = triton.compile(GluonASTSource(mma._w12_mma_kernel, sig, consts, attrs),
                           target=GPUTarget("cuda", 90, 32), options={"num_warps": wk * wr})
        ptx, ttgir = k.asm["ptx"], k.asm["ttgir"]
        # the main loop: from the label before its first mma.sync (after the escape MMAs' 2 NT:
        # one chunk, then a loop over further chunks) to the branch after the last
        first, last = -1, ptx.rfind("mma.sync")
        for _ in range(1 + (2 * nt if esc_mma else 0)):
            first = ptx.find("mma.sync", first + 1)
        loop = ptx[ptx.rfind("$L__BB", 0, first):ptx.find("bra", last)]
        if split:   # the launcher passes M == 1 as a constant: that variant compiles too
            sig1, consts1 = dict(sig, M="constexpr"), dict(consts, M=1)
            triton.compile(GluonASTSource(mma._w12_mma_kernel, sig1, consts1, attrs),
                           target=GPUTarget("cuda", 90, 32), options={"num_warps": wk * wr})
        out[_label(case)] = {
            "mma": ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
            "prmt": ptx.count("prmt.b32"),
            "v4": len(re.findall(r"ld\.global[^\n]*\.v4\.b32", ptx)),
            "local_alloc": ttgir.count("ttg.local_alloc"),
            "spills": spills(ptx), "words": words, "nt": nt, "ahead": ahead, "split": split,
            "esc_pre": esc_pre, "bf16": bf16, "esc_mma": esc_mma,
            "fadd_loop": len(re.findall(r"add\.(?:rn\.)?f32", loop)),
            "ld_before_wait": len(re.findall(r"ld\.global",
                                             ptx[:max(0, ptx.find("griddepcontrol.wait"))])),
            "atom": len(re.findall(r"atom\.[^\n]*global", ptx)),
            "pdl": pdl, "gdc": ptx.count("griddepcontrol."),
            "pos": {op: ptx.find(op) for op in ("griddepcontrol.wait",
                                                "griddepcontrol.launch_dependents", "st.global",
                                                "atom.", "mma.sync")},
            "v4_before_wait": len(re.findall(r"ld\.global[^\n]*\.v4\.b32",
                                             ptx[:max(0, ptx.find("griddepcontrol.wait"))])),
        }
    return out


def test_compiles_for_sm90_with_the_mma_layout():
    pytest.importorskip("triton.experimental.gluon")
    from tests.unit.sm90 import run_in_subprocess

    res = run_in_subprocess(__file__)
    assert set(res) == {_label(c) for c in CASES}
    for name, r in res.items():
        S, nt = r["words"], r["nt"]
        # per round: 2 rows x S H words per thread; each H word is one MMA step of each half
        # for each 8-row activation tile (pack 2: the two rows' words go to one mma)
        # esc_mma: one MMA per 8-row tile for the first chunk and one in the loop over the rest
        assert r["mma"] == 2 * S * nt + (2 * nt if r["esc_mma"] else 0), (name, r)
        # DECODE_PTX: 6 prmt per H word; bf16 words are the A registers as loaded
        assert r["prmt"] == (0 if r["bf16"] else 2 * S * 6), (name, r)
        # per round: the S steps' results summed into the accumulator (4 floats per 8-row tile
        # and step)
        assert r["fadd_loop"] == 4 * S * nt, (name, r)
        # per round a thread's 16-byte loads: three planes x two rows x S / 4 words, or bf16
        # two halves x two rows x 2S / 4 words (twice with the prologue's round loaded ahead),
        # plus the x loads
        per_round = 2 * S if r["bf16"] else 6 * S // 4
        planes = per_round * (2 if r["ahead"] else 1)
        assert r["v4"] >= planes + 2 * nt * S // 2, (name, r)
        assert r["local_alloc"] == 0, (name, r)        # no shared-memory layout conversion
        assert r["spills"] in (0, None), (name, r)
        # split-K: one ticket taken and one reset per program; none without
        assert r["atom"] == (2 if r["split"] else 0), (name, r)
        # PDL: one wait and one launch_dependents
        assert r["gdc"] == (2 if r["pdl"] else 0), (name, r)
        if r["pdl"]:
            pos = r["pos"]
            wait, launch = pos["griddepcontrol.wait"], pos["griddepcontrol.launch_dependents"]
            # every write after the wait; the first round's planes loaded before it (ahead)
            assert 0 <= wait < pos["st.global"], (name, pos)
            assert pos["atom."] == -1 or pos["atom."] > wait, (name, pos)
            assert r["v4_before_wait"] == (per_round if r["ahead"] else 0), (name, r)
            # esc_pre: the index range (2 loads) and the entries (kent and kval: one load per
            # entry and thread, esc_pre chunks of >= 4 per warp) come before the wait too
            if r["esc_pre"]:
                assert r["ld_before_wait"] >= r["v4_before_wait"] + 2 + 2 * r["esc_pre"], r
            # esc_mma: the range and the first chunk's entries (kent and kval, 8 + 8 entries)
            if r["esc_mma"]:
                assert r["ld_before_wait"] >= r["v4_before_wait"] + 2 + 4, r
            # the next kernel may launch after the main loop (2) or right after the wait (3)
            assert wait < launch and (launch > pos["mma.sync"]) == (r["pdl"] == 2), (name, pos)


def test_supported_and_refusals():
    assert not mma.mma_supported(0, 512)
    assert not mma.mma_supported(17, 512)
    assert not mma.mma_supported(4, 1000 - 4)    # K % 8
    if mma.HAS_GLUON:
        # a last partial round (64 / 160 columns: less than one round of any candidate) is
        # masked; the GPU checked it in session 32 (test_matches_torch_on_gpu)
        assert mma.mma_supported(4, 64) and mma.mma_supported(3, 160)
        assert mma.mma_supported(16, 256) and mma.mma_supported(3, 1000)   # Kp 1024
    assert mma.round_words(mma.MmaConfig(4, 1, 1, 8)) == 128
    w = encode(torch.randn(32, 64).bfloat16())
    from specpilot.w12 import kernel as K
    p = K.prepare(w, "cpu")
    with pytest.raises(ValueError, match="1 <= M <= 16"):
        mma.w12_mma(torch.zeros(17, 64, dtype=torch.bfloat16), p)
    with pytest.raises(ValueError, match="K == the weight's"):
        mma.w12_mma(torch.zeros(2, 72, dtype=torch.bfloat16), p)


def test_bf16_refusals():
    w = torch.zeros(32, 64, dtype=torch.bfloat16)
    assert not mma.bf16_mma_supported(17, 64) and not mma.bf16_mma_supported(4, 60)
    with pytest.raises(ValueError, match="1 <= M <= 16"):
        mma.bf16_mma(torch.zeros(17, 64, dtype=torch.bfloat16), w)
    with pytest.raises(ValueError, match="bf16 w"):
        mma.bf16_mma(torch.zeros(2, 64, dtype=torch.bfloat16), w.float())
    with pytest.raises(ValueError, match="bf16 w"):
        mma.bf16_mma(torch.zeros(2, 72, dtype=torch.bfloat16), w)
    # the tuning space: the W12 one without the escape placements
    assert all(not (c.esc_pre or c.esc_mma) for c in mma.bf16_candidates(5120, 17408, 132))
    assert len(mma.bf16_candidates(5120, 17408, 132)) * 3 == len(mma.candidates(5120, 17408, 132))


def test_launchers_pass_the_kernel_its_arguments(monkeypatch):
    """w12_mma and bf16_mma share one launcher: the positional arguments in the kernel's order
    (SIG) and each weight kind's constexprs (the kernel itself runs on the GPU only)."""
    if not mma.HAS_GLUON:
        pytest.skip("no Gluon")
    from specpilot.w12 import kernel as Kn

    seen = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append((grid, args, kw))

    monkeypatch.setattr(mma, "_w12_mma_kernel", Recorder())
    w = make_weight(48, 200, 1, n_edges=30)
    p = Kn.prepare(encode(w), "cpu")
    x = acts(3, 200, 2)
    cfg = mma.MmaConfig(2, 1, 2, 8, split=2, esc_pre=1)   # rounds of 512 columns: one, no split
    y = mma.w12_mma(x, p, cfg)
    w16 = make_weight(48, 600, 2, n_edges=0)   # 75 H words: 3 rounds of 32 -> runs of 2, 1
    mma.bf16_mma(acts(9, 600, 3), w16, mma.MmaConfig(2, 1, 1, 4, split=2))
    (g12, a12, k12), (g16, a16, k16) = seen
    assert len(a12) == len(a16) == len(SIG)
    named = [dict(zip(SIG, a)) for a in (a12, a16)]
    assert g12 == (3, 1) and g16 == (3, 2)
    assert named[0]["y_ptr"] is y and named[0]["ws_ptr"] is y and named[0]["RPS"] == 1
    assert named[0]["h_ptr"].shape == p.H.view(torch.int32).shape
    assert named[0]["kent_ptr"] is p.kent and named[0]["M"] == 3 and named[0]["N"] == 48
    assert (named[0]["KW"], named[0]["HW"], named[0]["sxm"]) == (100, p.Kp // 8, 100)
    assert k12["ESC"] and not k12["BF16"] and k12["EP"] == mma.esc_chunk(cfg) and k12["NT"] == 1
    assert named[1]["l_ptr"].dtype == torch.int32 and named[1]["HW"] == 75
    assert named[1]["ws_ptr"].shape == (2, 9, 48) and named[1]["RPS"] == 2
    assert k16["BF16"] and not k16["ESC"] and k16["NT"] == 2 and k16["USE_SPLIT"]
    assert k16["num_warps"] == 2 and "maxnreg" not in k16


def test_config_labels():
    assert mma.MmaConfig().short == "k4r1a1s4"
    assert mma.MmaConfig(2, 1, 2, 8, 168).short == "k2r1a2s8g168"
    assert mma.MmaConfig(2, 1, 2, 8, split=3).short == "k2r1a2s8x3"
    with pytest.raises(ValueError, match="bad values"):
        mma.MmaConfig(2, 1, 2, 6)
    with pytest.raises(ValueError, match="bad values"):
        mma.MmaConfig(split=0)
    assert mma.MmaConfig(2, 1, 2, 8, split=3, esc_pre=2).short == "k2r1a2s8x3e2"
    with pytest.raises(ValueError, match="bad values"):
        mma.MmaConfig(esc_pre=3)
    assert mma.MmaConfig(2, 1, 2, 8, 168, esc_mma=1).short == "k2r1a2s8g168m"
    for bad in (dict(esc_mma=2), dict(esc_mma=1, esc_pre=1)):
        with pytest.raises(ValueError, match="bad values"):
            mma.MmaConfig(**bad)
    assert mma.esc_chunk(mma.MmaConfig(16, 1)) == 64
    assert mma.esc_chunk(mma.MmaConfig(2, 1)) == mma.ESC_E


@pytest.mark.gpu
@pytest.mark.parametrize("N,K,per_row,narrow", [
    (256, 512, False, False), (300, 1000, False, False), (512, 2048, True, False),
    (1040, 5120, False, False),
    # last rounds partial (H words per row not a multiple of a round), weights in [1, 2): the
    # window's smallest code is large, so a masked-off plane word that decoded to it would show
    (64, 64, False, True), (96, 160, False, True), (272, 6656, False, True)])
def test_matches_torch_on_gpu(N, K, per_row, narrow):
    from specpilot.w12 import kernel as Kn

    x = (torch.rand(N, K) + 1).bfloat16() if narrow else make_weight(N, K, N + K, per_row,
                                                                        n_edges=N * K // 500)
    p = Kn.prepare(encode(x, per_row=per_row), "cuda")
    for cfg in (mma.MmaConfig(), mma.MmaConfig(2, 1, 1, 8), mma.MmaConfig(2, 1, 2, 8),
                mma.MmaConfig(4, 2, 0, 4), mma.MmaConfig(4, 1, 2, 8),
                # split-K: K = 5120 has 10 rounds of k2s8 -> runs of 4, 4, 2; 6656: 13 -> 5, 5, 3
                mma.MmaConfig(2, 1, 2, 8, split=3), mma.MmaConfig(2, 1, 1, 4, split=2),
                mma.MmaConfig(4, 2, 0, 4, split=4),
                # escape entries loaded ahead, products after the main loop (1-4 chunks ahead,
                # the rest of a row block's escapes in further chunks)
                mma.MmaConfig(2, 1, 2, 8, esc_pre=1), mma.MmaConfig(2, 1, 1, 4, esc_pre=2),
                mma.MmaConfig(2, 1, 2, 8, split=3, esc_pre=1),
                mma.MmaConfig(4, 2, 0, 4, split=2, esc_pre=4),
                # the escapes as MMAs (16 entries per warp and chunk; here 2e-3 of the weights
                # escape: a row block of K = 5120 has ~160, many chunks), with split-K, two
                # row blocks per program
                mma.MmaConfig(2, 1, 2, 8, esc_mma=1), mma.MmaConfig(2, 1, 1, 4, esc_mma=1),
                mma.MmaConfig(2, 1, 2, 8, split=3, esc_mma=1),
                mma.MmaConfig(2, 1, 2, 8, 136, esc_mma=1),
                mma.MmaConfig(4, 2, 0, 4, split=2, esc_mma=1)):
        for M in (1, 2, 3, 7, 8, 9, 16):
            a = acts(M, K, M)
            check_close(mma.w12_mma(a.cuda(), p, cfg), a, x)


@pytest.mark.gpu
@pytest.mark.parametrize("N,K", [(256, 512), (300, 1000), (1040, 5120), (96, 160), (64, 64)])
def test_bf16_matches_torch_on_gpu(N, K):
    """bf16_mma over the W12 kernel's configs (split-K, partial last rounds, NT 2) against
    float64 torch."""
    w = make_weight(N, K, N * 3 + K, n_edges=0)
    wc = w.cuda()
    for cfg in (mma.MmaConfig(), mma.MmaConfig(2, 1, 1, 8), mma.MmaConfig(2, 1, 2, 8),
                mma.MmaConfig(4, 2, 0, 4), mma.MmaConfig(2, 1, 1, 4),
                mma.MmaConfig(2, 1, 2, 8, split=3), mma.MmaConfig(4, 2, 0, 4, split=4)):
        for M in (1, 2, 3, 7, 8, 9, 16):
            a = acts(M, K, M + 7)
            check_close(mma.bf16_mma(a.cuda(), wc, cfg), a, w)


@pytest.mark.gpu
@pytest.mark.parametrize("N,K", [(300, 1024), (1040, 5120), (96, 160)])
def test_w12_equals_bf16_mode_bit_for_bit_without_escapes(N, K):
    """On a weight without escapes and K a multiple of format.PAD_K, w12_mma on its planes and
    bf16_mma on its bf16 words run the same loop on the same A registers (the decode rebuilds
    the exact words): equal bits at every config, split-K and esc_pre included. With K padded
    the two pair different columns (the planes' halves split at Kp / 2, the bf16 words' at
    K / 2), so the fp32 sums run in another order: on 300 x 1000 one output of M = 16 at
    k4r1a1s4 differed (H200, session 34)."""
    from specpilot.w12 import kernel as Kn

    g = torch.Generator().manual_seed(N + K)
    sign = torch.randint(0, 2, (N, K), generator=g).float() * 2 - 1
    x = (sign * (1 + torch.rand(N, K, generator=g))
         * torch.pow(2.0, torch.randint(-9, -2, (N, K), generator=g).float())).bfloat16()
    w = encode(x)
    assert w.n_escapes == 0   # 2^-9 .. 2^-2: inside the 14 exponents of the window
    p, xc = Kn.prepare(w, "cuda"), x.cuda()
    for cfg in (mma.MmaConfig(), mma.MmaConfig(2, 1, 2, 8), mma.MmaConfig(4, 2, 0, 4),
                mma.MmaConfig(2, 1, 1, 4, split=2), mma.MmaConfig(2, 1, 2, 8, esc_pre=1)):
        for M in (1, 2, 8, 9, 16):
            a = acts(M, K, M + 3).cuda()
            assert same_bits(mma.w12_mma(a, p, cfg), mma.bf16_mma(a, xc, cfg)), (cfg.short, M)


def test_split_plan_runs_whole_rounds():
    cfg = mma.MmaConfig(2, 1, 2, 8, split=3)        # rounds of 64 H words (512 columns)
    assert mma.split_plan(cfg, 5120) == (4, 3)       # 10 rounds: 4, 4, 2
    assert mma.split_plan(cfg, 17408) == (12, 3)     # 34 rounds: 12, 12, 10
    assert mma.split_plan(mma.MmaConfig(2, 1, 2, 8, split=8), 2048) == (1, 4)   # 4 rounds
    assert mma.split_plan(mma.MmaConfig(2, 1, 2, 8), 17408) == (34, 1)
    assert mma.split_plan(mma.MmaConfig(2, 1, 2, 8, split=4), 6656) == (4, 4)   # 13: 4,4,4,1


def test_candidates_split_where_the_row_blocks_are_few():
    # Qwen3.8's down (320 row blocks, 34 rounds of k2s8): every split with its own plan
    c = [x for x in mma.candidates(5120, 17408, 132) if not (x.esc_pre or x.esc_mma)]
    assert [x.short for x in c if x.warps_k == 2 and x.words == 8 and x.ahead == 2
            and not x.maxnreg] == ["k2r1a2s8", "k2r1a2s8x2", "k2r1a2s8x3", "k2r1a2s8x4",
                                   "k2r1a2s8x6", "k2r1a2s8x8"]
    assert {x.split for x in c if x.words == 4 and x.ahead == 1} == {1, 2, 3, 4, 6, 8}
    # k2r1a2s4 split too (it won the downs and o_projs at M = 16, session 37)
    assert {x.split for x in c if x.words == 4 and x.ahead == 2} == {1, 2, 3, 4, 6, 8}
    # the bases past SPLIT_BASES come last, unsplit
    n_bases = len(mma.CANDIDATES)
    assert all(x.split == 1 for x in c[len(c) - n_bases + mma.SPLIT_BASES:])
    # many row blocks (an lm_head, a gate_up: 2176 > 5 x 132): no split
    twins = tuple(c for base in mma.CANDIDATES
                  for c in (base, replace(base, esc_pre=1), replace(base, esc_mma=1)))
    assert mma.candidates(248320, 5120, 132) == twins
    assert mma.candidates(34816, 5120, 132) == twins
    # >= 2 rounds per program: K = 2048 has 4 rounds of k2s8 -> split 2 only
    assert [x.split for x in mma.candidates(256, 2048, 132) if x.words == 8 and x.warps_k == 2
            and x.ahead == 2 and not x.maxnreg and not x.esc_pre and not x.esc_mma] == [1, 2]
    # every candidate comes with its twins of the escapes after the main loop and as MMAs,
    # next to it
    c = mma.candidates(5120, 17408, 132)
    assert c[1::3] == tuple(replace(x, esc_pre=mma.ESC_PRE) for x in c[::3])
    assert c[2::3] == tuple(replace(x, esc_mma=1) for x in c[::3])


@pytest.mark.gpu
def test_gpu_graph_with_pdl_equals_without(monkeypatch):
    """A chain of norm -> W12-MMA layers (split-K among them, a bf16_mma layer every third)
    gives the same bits eagerly and in a CUDA graph, with PDL off and in each of its modes."""
    from specpilot.kernels import norm, pdl
    from specpilot.w12 import kernel as Kn

    if not pdl.supported(torch.device("cuda")):
        pytest.skip("PDL needs compute capability >= 9")
    D = 2048
    # finite escapes only (NaN outputs would not compare equal to themselves)
    layers = [Kn.prepare(encode(make_weight(D, D, i, edges=FINITE_EDGE, n_edges=200)), "cuda")
              for i in range(6)]
    cfgs = (mma.MmaConfig(2, 1, 2, 8), mma.MmaConfig(2, 1, 2, 8, split=2),
            mma.MmaConfig(2, 1, 1, 4, split=4, esc_pre=1), mma.MmaConfig(2, 1, 2, 8, esc_pre=2))
    x0 = acts(4, D, 0).cuda()
    nw = torch.randn(D, device="cuda").bfloat16()
    bf16_w = [make_weight(D, D, 50 + i, n_edges=0).cuda() for i in range(2)]

    def chain():
        h, outs = x0, []
        for i, p in enumerate(layers):
            h = mma.w12_mma(norm.rms_norm(h, nw, 1e-6), p, cfgs[i % len(cfgs)])
            outs.append(h)
            if i % 3 == 2:   # a bf16 layer (bf16_mma, PDL trigger "bf16") every third
                h = mma.bf16_mma(norm.rms_norm(h, nw, 1e-6), bf16_w[i % 2], cfgs[i % 2])
                outs.append(h)
        return outs

    check_pdl_modes(monkeypatch, chain, ((0, 0), (1, 1), (1, 2), (2, 3), (2, 2)))


def test_tune_file_holds_mma_configs(tmp_path, monkeypatch):
    from specpilot.w12 import kernel as Kn

    monkeypatch.setattr(Kn, "_TUNED", {})
    cfg = mma.MmaConfig(2, 1, 2, 8, 168, split=3)
    Kn._TUNED[Kn.MMA_KEY_PREFIX + "w12|H200|m4|n64|k64"] = cfg
    path = str(tmp_path / "tune.json")
    Kn.save_tuning(path)
    Kn._TUNED.clear()
    assert Kn.load_tuning(path) == 1
    assert Kn._TUNED[Kn.MMA_KEY_PREFIX + "w12|H200|m4|n64|k64"] == cfg


@pytest.mark.gpu
def test_gpu_w12_matmul_takes_the_tuned_mma_above_the_gemv(monkeypatch):
    """Fast-mode w12_matmul at MMA_MIN_M <= M <= MMA_MAX_M runs w12_mma with its tuned config
    (tuned on first use, cached under an "mma-" key)."""
    from specpilot.w12 import kernel as Kn

    monkeypatch.setattr(Kn, "_TUNED", {})
    monkeypatch.setattr(Kn, "_TUNE_FILE_LOADED", True)
    monkeypatch.delenv("SPECPILOT_W12_TUNE_FILE", raising=False)
    N, K = 1536, 2048
    p = Kn.prepare(encode(make_weight(N, K, 5, n_edges=200)), "cuda")
    for M in range(Kn.MMA_MIN_M, Kn.MMA_MAX_M + 1):
        a = acts(M, K, M).cuda()
        y = Kn.w12_matmul(a, p)
        cfg = Kn._TUNED[mma._tune_key(a, p)]
        assert same_bits(y, mma.w12_mma(a, p, cfg))
    assert len(Kn._TUNED) == Kn.MMA_MAX_M - Kn.MMA_MIN_M + 1


if __name__ == "__main__":
    print(json.dumps(_compile_all()))
