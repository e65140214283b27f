"""The W12 GEMM on Hopper's warpgroup MMA for 17-128 rows (specpilot/w12/wgmma.py).

Gluon has no interpreter, so on CPU the kernel is compiled for an H100/H200 (sm_90) in a
subprocess (tests/unit/sm90.py) and its code is checked for what the design relies on: 2 S
wgmmas per round (one per half), the decode's 6 prmt per H word and nothing else rearranging
the planes (the A operand is the decoded registers renamed: ``assert_trivial`` holds at
compile time), x stored with stmatrix, 16-byte plane loads, no shuffles and no spills. The
numerics run on the GPU (``gpu`` tests; ``scripts/gpu_w12_wgmma_bench.py``)."""

from __future__ import annotations

import re

import pytest
import torch

from specpilot.w12 import wgmma as W
from specpilot.w12.format import encode
from tests.unit.w12_data import (FINITE_EDGE, acts, check_close, check_pdl_modes, make_weight,
                                 same_bits)

SIG = {"x_ptr": "*bf16", "y_ptr": "*bf16", "ws_ptr": "*fp32", "lock_ptr": "*i32",
       "l_ptr": "*i32", "h_ptr": "*i32", "hb_ptr": "*u8", "koff_ptr": "*i32", "kent_ptr": "*i32",
       "kval_ptr": "*i16", "M": "i32", "N": "i32", "K": "i32", "HW": "i32", "G": "i32",
       "sxm": "i32", "sym": "i32", "RPS": "i32"}
ALIGNED = ("x_ptr", "y_ptr", "ws_ptr", "lock_ptr", "l_ptr", "h_ptr", "hb_ptr", "koff_ptr",
           "kent_ptr", "kval_ptr", "K", "HW", "sxm", "sym")
CASES = [  # (groups, words, NT, per-row base, escapes, split-K, PDL[, bf16])
    (1, 4, 64, False, True, False, 0), (2, 4, 64, False, True, False, 0),
    (1, 8, 64, False, True, False, 0), (1, 4, 128, False, True, False, 0),
    (2, 4, 128, False, True, False, 0), (1, 4, 32, True, True, False, 0),
    (1, 4, 16, False, False, False, 0), (2, 8, 32, False, True, True, 2),
    (1, 4, 64, True, True, True, 3), (2, 4, 16, False, True, False, 1),
    (1, 8, 16, True, True, True, 1), (2, 8, 64, True, True, True, 2),
    # bf16_wgmma: the same loop on bf16 words
    (1, 4, 64, False, False, False, 2, True), (2, 8, 32, False, False, True, 3, True),
    (1, 4, 128, False, False, False, 0, True), (1, 4, 32, False, False, True, 2, True)]


def _bf16(c) -> bool:
    return bool(c[7:] and c[7])


def _label(c) -> str:
    g, s, nt, per_row, esc, split, pdl = c[:7]
    return f"{'bf16 ' if _bf16(c) else ''}g{g}s{s} nt{nt}" \
           f"{' row' if per_row else ''}{' esc' if esc else ''}{' split' if split else ''} pdl{pdl}"


def _compile_all() -> dict:
    """Runs in the subprocess (sm90.run_in_subprocess): per case, facts about the code."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from tests.unit.sm90 import ptxas_report, wgmma_a_hazards

    out = {}
    for case in CASES:
        g, s, nt, per_row, esc, split, pdl = case[:7]
        bf16 = _bf16(case)
        consts = dict(NT=nt, S=s, NW=4 * g, HB_PER_ROW=per_row, ESC=esc, USE_SPLIT=split,
                      **W.layouts(W.WgConfig(g, s), nt), BF16=bf16, PDL=pdl)
        sig = dict(SIG, hb_ptr="*i32" if per_row else "*u8")
        if bf16:   # as bf16_wgmma launches it: the weight's int32 view in every weight argument
            sig.update(hb_ptr="*i32", kval_ptr="*i32")
        names = list(sig)
        sig.update({k: "constexpr" for k in consts})
        attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in ALIGNED}
        k = triton.compile(GluonASTSource(W._w12_wgmma_kernel, sig, consts, attrs),
                           target=GPUTarget("cuda", 90, 32), options={"num_warps": 4 * g})
        ptx, ttgir = k.asm["ptx"], k.asm["ttgir"]
        wait = ptx.find("griddepcontrol.wait")
        report, sass = ptxas_report(ptx, sass=True)
        spills = None if report is None else int(next(
            x for x in report.splitlines() if "spill stores" in x).split(
                "bytes spill stores")[0].split(",")[-1])
        out[_label(case)] = {
            "wgmma": len(re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{nt}k16\.f32\.bf16",
                                    ptx)),
            "prmt": ptx.count("prmt.b32"), "shfl": ptx.count("shfl."),
            "stmatrix": ptx.count("stmatrix"), "st_shared": len(re.findall(r"st\.shared", ptx)),
            "v4": len(re.findall(r"ld\.global[^\n]*\.v4\.b32", ptx)),
            "fence": ptx.count("fence.proxy.async"),
            "local_alloc": ttgir.count("ttg.local_alloc"), "spills": spills,
            # ptxas C7515: wgmmas serialised (a non-wgmma instruction defines an accumulator
            # register inside the pipeline)
            "serialised": None if report is None else "C7515" in report,
            "wait_group": re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+)", ptx),
            # the waits ptxas emitted (WARPGROUP.DEPBAR): as many as the PTX asks for, else it
            # serialised the wgmmas (it did so silently on an unrolled loop in session 38)
            "depbar": None if sass is None else re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\d+)",
                                                           sass),
            "atom": len(re.findall(r"atom\.[^\n]*global", ptx)),
            "gdc": ptx.count("griddepcontrol."),
            "wide_before_wait": len(re.findall(r"ld\.global[^\n]*\.v4\.b32", ptx[:max(0, wait)])),
            "wait": wait, "first_st": ptx.find("st.global"), "first_stm": ptx.find("stmatrix"),
            "g": g, "s": s, "nt": nt, "esc": esc, "split": split, "pdl": pdl, "bf16": bf16,
            "a_hazards": None if sass is None else wgmma_a_hazards(sass)}
    return out


def _compile_specialised() -> dict:
    """Runs in the subprocess: each config of ``candidates`` compiled and assembled as a launch
    at one activation row specialises it: Triton makes an int argument equal to 1 a constexpr
    (M; RPS with split-K), divisibility by 16 only where it holds (N = 272, G = 13, RPS = 104),
    PDL off. Per config, plain and with escapes and split-K: ptxas's spill bytes, or None
    without a ptxas for this PTX (a crash raises)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from tests.unit.sm90 import spills

    out = {}
    for g, s in ((1, 4), (2, 4), (1, 8), (2, 8)):
        for esc in (False, True):   # escapes with split-K (one round a program), or neither
            ints = dict(M=1, N=272, K=6656, HW=6656 // 8, G=13, sxm=6656, sym=272,
                        RPS=1 if esc else 104)
            consts = dict(NT=W.nt_for(1), S=s, NW=4 * g, HB_PER_ROW=False, ESC=esc,
                          USE_SPLIT=esc, **W.layouts(W.WgConfig(g, s), W.nt_for(1)), BF16=False,
                          PDL=0)
            sig, attrs = dict(SIG), {}
            for i, name in enumerate(SIG):
                v = ints.get(name, 16)   # pointers: 16-byte aligned
                if v == 1:
                    sig[name], consts[name] = "constexpr", 1
                elif v % 16 == 0:
                    attrs[(i,)] = [["tt.divisibility", 16]]
            sig.update({k: "constexpr" for k in consts})
            k = triton.compile(GluonASTSource(W._w12_wgmma_kernel, sig, consts, attrs),
                               target=GPUTarget("cuda", 90, 32), options={"num_warps": 4 * g})
            out[f"g{g}s{s}{' esc split' if esc else ''}"] = spills(k.asm["ptx"])
    return out


def test_every_config_assembles_as_a_one_row_launch_specialises_it():
    """Session 42: triton 3.6's ptxas crashed (SIGSEGV) on words-2 configs as launched at M = 1
    (M a constexpr), which compile tests with every int a plain argument did not see; words 2 is
    gone, and each config offered must assemble so specialised."""
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    from tests.unit.sm90 import run_in_subprocess

    res = run_in_subprocess(__file__, "specialised")
    assert set(res) == {f"g{g}s{s}{e}" for g in (1, 2) for s in (4, 8) for e in ("", " esc split")}
    assert all(v in (0, None) for v in res.values()), res


def test_compiles_for_sm90_with_wgmma():
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    from tests.unit.sm90 import run_in_subprocess

    res = run_in_subprocess(__file__)
    assert set(res) == {_label(c) for c in CASES}
    for name, r in res.items():
        S = r["s"]
        # per round one wgmma per k16 step of each half (S steps each), plus one escape wgmma
        # (16 entries) in the prologue's loop
        assert r["wgmma"] == 2 * S + (1 if r["esc"] else 0), (name, r)
        # the decode (DECODE_PTX: 6 prmt per H word, 2 rows x S words per thread) and no byte
        # shuffling around it; bf16 words are the A registers as loaded
        assert r["prmt"] == (0 if r["bf16"] else 12 * S), (name, r)
        assert r["shfl"] == 0 and r["spills"] in (0, None), (name, r)
        assert r["serialised"] in (False, None), (name, r)
        # the waits: per round all of it (0); the escapes' synchronous wgmma (0)
        assert r["wait_group"] == ["0"] + (["0"] if r["esc"] else []), (name, r)
        if r["depbar"] is not None:
            assert sorted(r["depbar"]) == sorted(f"0x{w}" for w in r["wait_group"]), (name, r)
            # no register an in-flight wgmma reads (its A operand) is written before its wait
            assert r["a_hazards"] == [], (name, r["a_hazards"][:5])
        # x into shared memory: the prologue's round and the loop's next round, with stmatrix
        # (the logical K order is a register renaming, the stores stay vectorised)
        assert r["stmatrix"] >= 4 and r["st_shared"] <= (1 if r["split"] else 0), (name, r)
        # one fence per x store (prologue, loop) and per escape chunk
        assert r["fence"] == 2 + (1 if r["esc"] else 0), (name, r)
        # the x buffers and the escape tile
        assert r["local_alloc"] == 1 + (1 if r["esc"] else 0), (name, r)
        # a round's weight words in 16-byte loads, prologue and loop: W12 three planes x two
        # rows x S words, bf16 two halves x two rows x 2 S words
        per_round = 2 * S if r["bf16"] else 6 * (S // 4)
        assert r["v4"] >= 2 * per_round, (name, r)
        assert r["atom"] == (2 if r["split"] else 0), (name, r)
        assert r["gdc"] == (2 if r["pdl"] else 0), (name, r)
        if r["pdl"]:
            # the first round's weight words before the wait; x (stored from registers) and
            # every global write after it
            assert r["wide_before_wait"] >= per_round, (name, r)
            assert 0 <= r["wait"] < r["first_stm"] and r["wait"] < r["first_st"], (name, r)


# SASS of a loop that waits for a round's wgmmas one round late (session 39's removed overlap
# variant, trimmed): after the wait for all but the newest group, the in-flight group's A
# registers R40-R43 are loaded again; then a back edge with a group still in flight
_HAZARD_SASS = """
        /*0db0*/                   WARPGROUP.ARRIVE ;
        /*0f60*/                   HGMMA.64x32x16.F32.BF16 R24, R68, gdesc[UR20], R24, gsb0 ;
        /*1060*/                   WARPGROUP.ARRIVE ;
        /*10f0*/                   HGMMA.64x32x16.F32.BF16 R24, R40, gdesc[UR12], R24, gsb0 ;
        /*1120*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*1130*/                   IADD3 R70, P5, R0, UR14, RZ ;
        /*1140*/              @P3 LDG.E.128 R40, desc[UR18][R42.64+0x10] ;
        /*1150*/                   STSM.16.M88.4 [R67], R40 ;
        /*1160*/                   IMAD.WIDE R38, R63, 0x4, R92 ;
        /*1170*/               @P0 BRA 0x1060 ;
        /*1180*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*1190*/                   MOV R41, R2 ;
"""


def test_wgmma_a_hazard_check():
    """sm90.wgmma_a_hazards: the writes to an in-flight wgmma's A registers, also round the loop
    (the next round's IMAD.WIDE R38 writes R38-R39 only; the first group's R68-R71 were let go
    by the wait for all but one group; R41 after the last wait is free)."""
    from tests.unit.sm90 import wgmma_a_hazards

    assert wgmma_a_hazards(_HAZARD_SASS) == ["0x1140 LDG.E.128 R40, desc[UR18][R42.64+0x10]"]
    late = _HAZARD_SASS.replace("R38, R63", "R42, R63")   # writes R42-R43: in flight again
    assert wgmma_a_hazards(late) == ["0x1140 LDG.E.128 R40, desc[UR18][R42.64+0x10]",
                                     "0x1160 IMAD.WIDE R42, R63, 0x4, R92"]
    waited = _HAZARD_SASS.replace("gsb0, 0x1 ;", "gsb0, 0x0 ;")
    assert wgmma_a_hazards(waited) == []


def test_config_labels_and_refusals():
    assert W.WgConfig().short == "g1s4"
    assert W.WgConfig(2, 8, 3).short == "g2s8x3"
    # words 2 was removed in session 42, as was the ring's fourth field (stages): a config or a
    # tune-file entry asking for either is refused
    for bad in (dict(groups=3), dict(words=6), dict(words=2), dict(split=0)):
        with pytest.raises(ValueError, match="bad values"):
            W.WgConfig(**bad)
    with pytest.raises(TypeError):
        W.WgConfig(1, 4, 1, 3)
    assert [W.nt_for(m) for m in (1, 8, 9, 17, 32, 33, 100, 128)] == [16, 16, 16, 32, 32, 64,
                                                                      128, 128]
    assert not W.supported(0, 512) and not W.supported(W.MAX_M + 1, 512)
    assert not W.supported(64, 100)                     # K % 8
    assert not W.supported(64, 512, "cpu")              # wgmma: compute capability 9.x only
    p = _planes(64, 256)
    for bad in (acts(129, 256, 0), acts(4, 128, 0), acts(4, 256, 0).float()):
        with pytest.raises(ValueError, match="w12_wgmma: needs"):
            W.w12_wgmma(bad, p, W.WgConfig())
    w = make_weight(64, 256, 3, n_edges=0)
    for bad in (acts(129, 256, 0), acts(4, 128, 0)):
        with pytest.raises(ValueError, match="bf16_wgmma: needs"):
            W.bf16_wgmma(bad, w, W.WgConfig())
    with pytest.raises(ValueError, match="bf16 weight"):
        W.bf16_wgmma(acts(4, 256, 0), w.float(), W.WgConfig())
    with pytest.raises(RuntimeError, match="compute capability 9|needs Triton"):
        W.bf16_wgmma(acts(20, 256, 0), w, W.WgConfig())


def _planes(N, K, seed=1, n_edges=30):
    from specpilot.w12 import kernel as Kn
    return Kn.prepare(encode(make_weight(N, K, seed, n_edges=n_edges)), "cpu")


def test_split_plan_and_smem():
    # rounds of 16 S pair columns over Kp / 2
    assert W.split_plan(W.WgConfig(1, 4), 17408) == (136, 1)       # 8704 / 64
    assert W.split_plan(W.WgConfig(1, 4, 3), 17408) == (46, 3)     # 46, 46, 44
    assert W.split_plan(W.WgConfig(2, 8, 4), 5120) == (5, 4)       # 20 rounds of 128
    assert W.split_plan(W.WgConfig(1, 4, 8), 1000) == (1, 8)       # Kp 1024: 8 rounds
    assert W.split_plan(W.WgConfig(1, 4), 1000, bf16=True) == (8, 1)   # K / 2 = 500: 8 rounds
    assert W.split_plan(W.WgConfig(1, 4, 3), 24, bf16=True) == (1, 1)  # one partial round
    assert W.smem_bytes(W.WgConfig(1, 4), 64) == 2 * 2 * 64 * 64 * 2 + 64 * 16 * 2
    assert W.smem_bytes(W.WgConfig(1, 8), 128) == 2 * 2 * 128 * 128 * 2 + 128 * 16 * 2


def test_candidates():
    # Qwen3.8's down at 64 rows: 80 / 40 row blocks of 64 / 128 rows: the words-4 bases split
    # while the programs stay <= 2 per SM
    c = W.candidates(64, 5120, 17408, 132)
    assert [x.short for x in c if x.groups == 1] == ["g1s4", "g1s4x2", "g1s4x3", "g1s8"]
    assert [x.split for x in c if x.groups == 2 and x.words == 4] == [1, 2, 3, 4, 6]
    assert [x.short for x in c if x.words == 8] == ["g1s8", "g2s8"]
    assert {x.words for x in c} == {4, 8}
    assert all(W.smem_bytes(x, 64) <= W.SMEM_LIMIT for x in c)
    # a gate_up: many row blocks, no split
    assert all(x.split == 1 for x in W.candidates(64, 34816, 5120, 132))
    # 128 rows: words 8 would spill (MAX_WORDS_NT), so only 4
    assert [x.short for x in W.candidates(128, 34816, 5120, 132)] == ["g1s4", "g2s4"]
    assert all(W.smem_bytes(x, 128) <= W.SMEM_LIMIT for x in W.candidates(128, 5120, 17408, 132))
    # the default: the smallest split that gives every SM a program
    assert W.default_config(64, 5120, 17408, 132) == W.WgConfig(1, 4, 2)
    assert W.default_config(64, 34816, 5120, 132) == W.WgConfig(1, 4)
    assert W.default_config(32, 64, 64, 132) == W.WgConfig(1, 4)    # 1 round: no split


def test_launcher_passes_the_kernel_its_arguments(monkeypatch):
    """The positional arguments in the kernel's order (SIG) and the constexprs (the kernel
    itself runs on the GPU only)."""
    if not W.HAS_GLUON:
        pytest.skip("no Gluon")
    seen = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append((grid, args, kw))

    monkeypatch.setattr(W, "_w12_wgmma_kernel", Recorder())
    monkeypatch.setattr(W, "supported", lambda M, K, device=None: True)
    p = _planes(200, 1000)                         # Kp 1024: 8 rounds of 64 pair columns
    x = acts(40, 1000, 2)
    y = W.w12_wgmma(x, p, W.WgConfig(1, 4, 3))     # runs of 3, 3, 2
    W.w12_wgmma(acts(17, 1000, 3), p, W.WgConfig(2, 8))
    w16 = make_weight(48, 600, 2, n_edges=0)     # K / 2 = 300: 5 rounds of 64 -> runs of 3, 2
    W.bf16_wgmma(acts(33, 600, 3), w16, W.WgConfig(1, 4, 2))
    (g1, a1, k1), (g2, a2, k2), (g3, a3, k3) = seen
    n3 = dict(zip(SIG, a3))
    assert g3 == (1, 2) and k3["BF16"] and not k3["ESC"] and k3["NT"] == 64
    assert n3["l_ptr"].dtype == torch.int32 and n3["l_ptr"].shape == (48, 300)
    assert n3["HW"] == 75 and n3["RPS"] == 3 and n3["ws_ptr"].shape == (2, 33, 48)
    assert not k1["BF16"] and not k2["BF16"]
    assert len(a1) == len(SIG)
    n1, n2 = dict(zip(SIG, a1)), dict(zip(SIG, a2))
    assert g1 == (4, 3) and g2 == (2, 1)
    assert n1["y_ptr"] is y and n1["ws_ptr"].shape == (3, 40, 200) and n1["RPS"] == 3
    assert n1["l_ptr"].dtype == torch.int32 and n1["l_ptr"].shape == (200, 256)
    assert n1["h_ptr"].shape == (200, 128) and n1["hb_ptr"] is p.hb
    assert (n1["M"], n1["N"], n1["K"], n1["HW"], n1["G"]) == (40, 200, 1000, 128, 16)
    assert n1["kent_ptr"] is p.kent and n1["sxm"] == 1000 and n1["sym"] == 200
    assert k1["NT"] == 64 and k1["S"] == 4 and k1["NW"] == 4 and k1["USE_SPLIT"]
    assert k1["ESC"] and not k1["HB_PER_ROW"] and k1["num_warps"] == 4
    assert n2["ws_ptr"] is n2["y_ptr"] and k2["NT"] == 32 and k2["NW"] == 8 and k2["S"] == 8
    assert not k2["USE_SPLIT"] and k2["num_warps"] == 8
    # a per-row base goes as the int32 view of its [N, 16] bytes (word 0: the table word)
    from specpilot.w12 import kernel as Kn
    pr = Kn.prepare(encode(make_weight(64, 256, 5, per_row=True), per_row=True), "cpu")
    assert pr.per_row
    W.w12_wgmma(acts(20, 256, 4), pr, W.WgConfig())
    _, a4, k4 = seen[-1]
    assert k4["HB_PER_ROW"] and dict(zip(SIG, a4))["hb_ptr"].dtype == torch.int32
    assert dict(zip(SIG, a4))["hb_ptr"].shape == (64, 4)


def test_w12_matmul_routes_here_only_when_enabled(monkeypatch):
    """$SPECPILOT_W12_WGMMA=1 sends WGMMA_MIN_M..MAX_M rows here (on CUDA, sm_90); off by
    default, and never at <= 16 rows (the mma.sync kernel's)."""
    from specpilot.w12 import kernel as Kn

    calls = []
    monkeypatch.setattr(W, "w12_wgmma", lambda x, p: calls.append(x.shape[0]) or "wg")
    monkeypatch.setattr(W, "supported", lambda M, K, device=None: True)
    monkeypatch.delenv(W.ENV, raising=False)
    assert not W.enabled()
    monkeypatch.setenv(W.ENV, "1")
    assert W.enabled() and Kn.WGMMA_MIN_M == Kn.MMA_MAX_M + 1
    p = _planes(64, 256)

    class FakeCuda(torch.Tensor):   # w12_matmul routes by x.is_cuda
        @property
        def is_cuda(self):
            return True

    for M in (Kn.WGMMA_MIN_M, 64, W.MAX_M):
        x = acts(M, 256, M).as_subclass(FakeCuda)
        assert Kn.w12_matmul(x, p) == "wg"
    assert calls == [Kn.WGMMA_MIN_M, 64, W.MAX_M]


def test_tune_file_holds_wgmma_configs(tmp_path, monkeypatch):
    from specpilot.w12 import kernel as Kn

    monkeypatch.setattr(Kn, "_TUNED", {})
    cfg = W.WgConfig(2, 8, 3)
    key = W.KEY_PREFIX + "w12|H200|m64|n5120|k17408"
    Kn._TUNED[key] = cfg
    path = str(tmp_path / "tune.json")
    Kn.save_tuning(path)
    Kn._TUNED.clear()
    assert Kn.load_tuning(path) == 1
    assert Kn._TUNED[key] == cfg


GPU_CONFIGS = (W.WgConfig(1, 4), W.WgConfig(2, 4), W.WgConfig(1, 8), W.WgConfig(2, 8),
               W.WgConfig(1, 4, 3), W.WgConfig(2, 8, 2), W.WgConfig(2, 4, 3))


@pytest.mark.gpu
@pytest.mark.parametrize("N,K,per_row,narrow", [
    (256, 512, False, False), (300, 1000, False, False), (512, 2048, True, False),
    (1040, 5120, False, False),
    # last rounds partial, weights in [1, 2) (a masked-off plane word decoded to the window's
    # smallest code would show), N not a multiple of 64 / 128, K < 32
    (64, 64, False, True), (96, 160, False, True), (272, 6656, False, True),
    (130, 24, False, True)])
def test_matches_torch_on_gpu(N, K, per_row, narrow):
    from specpilot.w12 import kernel as Kn

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma: compute capability 9.x")
    x = (torch.rand(N, K) + 1).bfloat16() if narrow else make_weight(N, K, N + K, per_row,
                                                                        n_edges=N * K // 500)
    p = Kn.prepare(encode(x, per_row=per_row), "cuda")
    for cfg in GPU_CONFIGS:
        for M in (1, 9, 16, 17, 33, 64, 100, 128):
            if cfg.words * W.nt_for(M) > W.MAX_WORDS_NT:
                continue
            a = acts(M, K, M)
            check_close(W.w12_wgmma(a.cuda(), p, cfg), a, x)


@pytest.mark.gpu
@pytest.mark.parametrize("N,K", [(256, 512), (300, 1000), (1040, 5120), (96, 160), (130, 24)])
def test_bf16_matches_torch_on_gpu(N, K):
    """bf16_wgmma (split-K, partial last rounds, every NT) against float64 torch."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma: compute capability 9.x")
    w = make_weight(N, K, N * 3 + K, n_edges=0)
    wc = w.cuda()
    for cfg in GPU_CONFIGS:
        for M in (1, 9, 17, 33, 64, 128):
            if cfg.words * W.nt_for(M) > W.MAX_WORDS_NT:
                continue
            a = acts(M, K, M + 7)
            check_close(W.bf16_wgmma(a.cuda(), wc, cfg), a, w)


@pytest.mark.gpu
@pytest.mark.parametrize("N,K", [(300, 1024), (1040, 5120)])
def test_w12_equals_bf16_mode_bit_for_bit_without_escapes(N, K):
    """On a weight without escapes and K a multiple of format.PAD_K, w12_wgmma on its planes
    and bf16_wgmma on its bf16 words run the same wgmmas on the same A registers: equal bits at
    every config (split-K included)."""
    from specpilot.w12 import kernel as Kn

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma: compute capability 9.x")
    g = torch.Generator().manual_seed(N + K)
    sign = torch.randint(0, 2, (N, K), generator=g).float() * 2 - 1
    x = (sign * (1 + torch.rand(N, K, generator=g))
         * torch.pow(2.0, torch.randint(-9, -2, (N, K), generator=g).float())).bfloat16()
    w = encode(x)
    assert w.n_escapes == 0   # 2^-9 .. 2^-2: inside the 14 exponents of the window
    p, xc = Kn.prepare(w, "cuda"), x.cuda()
    for cfg in GPU_CONFIGS:
        for M in (17, 64, 128):
            if cfg.words * W.nt_for(M) > W.MAX_WORDS_NT:
                continue
            a = acts(M, K, M + 3).cuda()
            assert same_bits(W.w12_wgmma(a, p, cfg), W.bf16_wgmma(a, xc, cfg)), (cfg.short, M)


@pytest.mark.gpu
def test_gpu_graph_with_pdl_equals_without(monkeypatch):
    """A chain of norm -> W12-WGMMA layers (split-K among them) gives the same bits
    eagerly and in a CUDA graph, with PDL off and in each of its modes, and the same bits in
    every mode."""
    from specpilot.kernels import norm
    from specpilot.w12 import kernel as Kn

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma: compute capability 9.x")
    D = 2048
    layers = [Kn.prepare(encode(make_weight(D, D, i, edges=FINITE_EDGE, n_edges=200)), "cuda")
              for i in range(4)]
    cfgs = (W.WgConfig(1, 4), W.WgConfig(2, 8, 2), W.WgConfig(1, 4, 3), W.WgConfig(2, 4))
    x0 = acts(40, D, 0).cuda()
    nw = torch.randn(D, device="cuda").bfloat16()
    w16 = make_weight(D, D, 50, n_edges=0).cuda()

    def chain():
        h, outs = x0, []
        for i, p in enumerate(layers):
            h = W.w12_wgmma(norm.rms_norm(h, nw, 1e-6), p, cfgs[i])
            outs.append(h)
            if i == 1:   # a bf16 layer (bf16_wgmma, PDL trigger "bf16")
                h = W.bf16_wgmma(norm.rms_norm(h, nw, 1e-6), w16, cfgs[2])
                outs.append(h)
        return outs

    check_pdl_modes(monkeypatch, chain, ((0, 0), (1, 1), (1, 2), (2, 3)))


if __name__ == "__main__":
    import json
    import sys
    print(json.dumps(_compile_specialised() if sys.argv[1:] == ["specialised"]
                     else _compile_all()))
