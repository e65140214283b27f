"""The warp-specialized W12 GEMM (specpilot/w12/ws.py). Gluon has no interpreter: on CPU the kernel
is compiled for sm_90 and its code checked; the numerics run on the GPU (marked tests, and
scripts/gpu_w12_ws_probe.py)."""
from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from specpilot.w12 import mma, ws
from specpilot.w12.format import encode
from tests.unit.w12_data import FINITE_EDGE, acts, check_close, check_pdl_modes, make_weight

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# (stages, maxnreg, NT, ESC, HB_PER_ROW, PDL, TAIL, BOX3, EW: WsConfig.ws_ewarp)
CASES = [(3, 0, 1, True, False, 2, False, False, False),
         (3, 0, 2, True, True, 0, False, True, False),
         (2, 128, 2, False, False, 2, False, False, False),
         (4, 0, 2, True, False, 0, False, True, False),
         (2, 128, 1, True, True, 0, True, True, False),
         (4, 0, 2, True, False, 2, True, False, False),
         (4, 0, 2, True, False, 2, True, True, False),
         (3, 0, 2, True, False, 2, True, True, True),
         (2, 128, 1, True, True, 0, False, True, True),
         (3, 0, 1, True, False, 2, False, False, True),
         # 17-32 rows (NT 4): escapes through the escape warp, or none
         (2, 0, 4, True, False, 2, False, True, True),
         (2, 0, 4, True, True, 2, True, True, True),
         (2, 0, 4, False, False, 0, False, False, False)]
# 32-row blocks (WsConfig.ws_rows 2, WR in the kernel; the last field): at 8 and 16 rows,
# escapes through the escape warp, or none
CASES_R2 = [(3, 0, 1, True, False, 2, False, True, True, 2),
            (2, 0, 2, True, True, 2, True, True, True, 2),
            (2, 0, 2, False, False, 0, False, False, False, 2)]
# x resident (WsConfig.ws_xres, XR in the kernel: the resident rounds; the last field): 16 rows
# at K = 5120 with the escape warp, 8 rows with the consumers' escapes and per-row bases, 16 rows
# at K = 4096 without escapes (3-D boxes, whole blocks); K in parts (every block split, TAIL 2:
# the partials only, no ticket): 16 rows, 3 rounds a part, with the escape warp, and 8 rows with
# the consumers' escapes
CASES_X = [(2, 0, 2, True, False, 2, False, True, True, 1, 5),
           (4, 0, 1, True, True, 2, False, True, False, 1, 5),
           (3, 0, 2, False, False, 0, False, True, False, 1, 4),
           (4, 0, 2, True, False, 2, 2, True, True, 1, 3),
           (4, 0, 1, True, True, 0, 2, True, False, 1, 6)]
# ws_tail configs the GPU tests run next to the candidates (on weights of fewer blocks than
# programs every block is split: 2 to 7 ways over the shapes of test_matches_torch_on_gpu)
# and the candidates' counterparts with / without the escape warp
TAIL_CONFIGS = (ws.WsConfig(3, ws_tail=1), ws.WsConfig(4, ws_tail=1),
                ws.WsConfig(2, 128, 2, ws_tail=1), ws.WsConfig(3, ws_tail=1, ws_ewarp=1),
                ws.WsConfig(2, 128, 2), ws.WsConfig(4, ws_ewarp=1))
# ... and at 17-32 rows (NT 4) the candidates, their tail split and ws2 without the escape warp
# (weights without escapes only)
NT4_CONFIGS = ws.CANDIDATES32 + (ws.WsConfig(2, ws_tail=1, ws_ewarp=1), ws.WsConfig(2))
# ... and 32-row blocks (ws_rows 2) at 1-16 rows: with the escape warp, its tail split, and
# without it (weights without escapes only)
R2_CONFIGS = ws.CANDIDATES_R2 + (ws.WsConfig(2, ws_tail=1, ws_ewarp=1, ws_rows=2),
                                 ws.WsConfig(3, ws_tail=1, ws_ewarp=1, ws_rows=2),
                                 ws.WsConfig(2, ws_rows=2))
# ... and x resident (ws_xres) where K % 256 == 0 and it fits: with and without the escape
# warp, whole K and in 2 or 3 parts (every block split)
X_CONFIGS = ws.CANDIDATES_X + (ws.WsConfig(2, ws_xres=1), ws.WsConfig(4, ws_xres=1),
                               ws.WsConfig(2, 128, 2, ws_xres=1),
                               ws.WsConfig(4, ws_ewarp=1, ws_xres=2), ws.WsConfig(4, ws_xres=3),
                               ws.WsConfig(3, ws_ewarp=1, ws_xres=3))
SIG = dict(y_ptr="*bf16", ws_ptr="*fp32", lock_ptr="*i32", x16_ptr="*bf16", hb_ptr="*u8",
           koff_ptr="*i32", kent_ptr="*i32", kval_ptr="*i16", M="i32", N="i32", sxm="i32",
           sym="i32", G="i32", n_items="i32", n_rounds="i32", full="i32", splits="i32", rps="i32")


def _compile_all() -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from tests.unit.sm90 import ptxas_report

    sw = ws.swizzle()
    P, Q, X, LP, LX, QE, EL = ws.layouts()
    out = {}
    sw3 = ws.swizzle(3)
    QE1, EL1 = ws.esc_warp_layouts()
    for stages, maxnreg, nt, esc, per_row, pdl, tail, box3, ew, wr, xr in (
            [c + (1, 0) for c in CASES] + [c + (0,) for c in CASES_R2] + CASES_X):
        if box3:
            desc = f"tensordesc<i32[{ws.WK}, 16, {ws.TILE_W}],{sw3!r}>"
            xdesc = f"tensordesc<i32[{2 * ws.WK}, 8, {ws.TILE_W}],{sw3!r}>"
        else:
            desc = f"tensordesc<i32[16, {ws.TILE_W}],{sw!r}>"
            xdesc = f"tensordesc<i32[8, {ws.TILE_W}],{sw!r}>"
        sig = dict(h_desc=desc, la_desc=desc, lb_desc=desc, xa_desc=xdesc, xb_desc=xdesc, **SIG)
        if per_row:
            sig["hb_ptr"] = "*i32"
        if not tail:   # the launcher passes y as the (unread) workspace and tickets
            sig.update(ws_ptr="*bf16", lock_ptr="*bf16")
        elif tail == 2:   # ... and as the (unread) tickets of x resident in parts
            sig.update(lock_ptr="*bf16")
        consts = dict(WK=ws.WK, NT=nt, NS=stages, P=P, Q=Q, X=X, LP=LP, LX=LX, QE=QE, EL=EL,
                      ESC=esc, HB_PER_ROW=per_row, PDL=pdl, RL=ws.sum_layout(), TAIL=tail,
                      BOX3=box3, SW=sw, EW=ew, QE1=QE1, EL1=EL1, WR=wr, XR=xr)
        sig.update({k: "constexpr" for k in consts})
        opts = {"num_warps": ws.WK, **({"maxnreg": maxnreg} if maxnreg else {})}
        k = triton.compile(GluonASTSource(ws._ws_kernel, sig, consts, {}),
                           target=GPUTarget("cuda", 90, 32), options=opts)
        ptx = k.asm["ptx"]
        # a round's reads: from the consumers' wait on the stage to their release of it
        first = ptx.find("ld.shared.v4")
        start = ptx.rfind("mbarrier.try_wait", 0, first)
        loop = ptx[start:ptx.find("mbarrier.arrive", first)]
        # ... and the whole round loop: its basic block (header comment to the next label)
        head = ptx.rfind("Loop Header", 0, start)
        body = ptx[head:ptx.find("$L__BB", start)]
        rep = ptxas_report(ptx) or ""
        name = (f"ws{stages}g{maxnreg} nt{nt} esc{int(esc)} row{int(per_row)} pdl{pdl} "
                f"box{int(box3)} ew{int(ew)} wr{wr} xr{xr}")
        out[f"{name} tail{int(tail)}"] = {
            "st_global": ptx.count("st.global"),
            "nt": nt, "pdl": pdl, "esc": esc, "ew": ew, "wr": wr, "xr": xr,
            "mma": ptx.count("mma.sync.aligned.m16n8k16"),
            "tma": ptx.count("cp.async.bulk.tensor"),
            "lds_v4": loop.count("ld.shared.v4"), "lds": loop.count("ld.shared"),
            "gdc": ptx.count("griddepcontrol."),
            "setmaxnreg": ptx.count("setmaxnreg"),
            "spills": [int(t.split("bytes spill stores")[0].split(",")[-1])
                       for t in rep.splitlines() if "spill stores" in t],
            "smem": k.metadata.shared, "ring": ws.smem_bytes(stages, nt, wr, xr),
            "bar": ptx.count("bar.sync"), "stages": stages, "tail": tail,
            "fence": ptx.count("fence.proxy.async"),
            "mb_arrive": ptx.count("mbarrier.arrive.shared::cta.b64"), "box3": box3,
            "tma3": ptx.count("cp.async.bulk.tensor.3d"),
            "loop_fadd": body.count("add.f32"), "loop_mma": body.count("mma.sync"),
            "atom": ptx.count("atom.global"),
        }
    return out


def test_compiles_for_sm90():
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    from tests.unit.sm90 import run_in_subprocess

    res = run_in_subprocess(__file__)
    assert len(res) == len(CASES) + len(CASES_R2) + len(CASES_X)
    for name, r in res.items():
        nt, wr = r["nt"], r["wr"]
        # per round and 8-row activation tile: one MMA per H word and half (S = 8, pack 2) and
        # 16-row block (wr); with escapes one per 8-row tile for a block's first chunk and one
        # in the loop over further chunks, or with the escape warp (EW) one in its loop over
        # chunks, per 16-row block
        esc_mma = nt * (wr if r["ew"] else 2) if r["esc"] else 0
        assert r["mma"] == 2 * ws.S * nt * wr + esc_mma, (name, r)
        # per round: three plane tiles x two slot rows x two 16-byte reads per 16-row block,
        # and per half and 8-token tile four (16 words, read once for both blocks), and no
        # other shared-memory read
        assert r["lds_v4"] == r["lds"] == 12 * wr + 8 * nt, (name, r)
        # the producer: per round and consumer warp three plane boxes per 16-row block and
        # 2 x 2 nt x boxes; with BOX3 per round one 3-D box per plane and block and per x half
        # and 8-token tile
        if r["box3"]:
            assert r["tma"] == r["tma3"] == 3 * wr + 2 * nt, (name, r)
        else:
            assert r["tma"] == ws.WK * (3 * wr + 4 * nt) and r["tma3"] == 0, (name, r)
        assert r["setmaxnreg"] > 0 and r["spills"] in ([0], []), (name, r)
        extra = ws.SMEM_EXTRA + ws.SUM_BYTES + r["ew"] * (ws.corr_slots(nt, wr) * ws.CORR_BYTES
                                                          + ws.SMEM_EXTRA)
        assert r["ring"] <= r["smem"] <= r["ring"] + extra, (name, r)
        # named barriers (bar.sync in the PTX): at most one per stage at the start, two per
        # round (the wait on a stage, its release), the cross-warp sum's two per 8-token tile
        # and one before a block's first store (gl.sum's reduction took 6 or more per tile), and
        # with TAIL 1 at most 5 in the split-K branch (the partials written before the ticket,
        # an atomic add; its broadcast; an exchange resets it), with EW one before the release
        # of the escape warp's buffer
        ticketed = int(r["tail"] == 1)
        assert r["bar"] <= r["stages"] + 1 + 2 * nt * wr + 5 * ticketed + r["ew"], (name, r)
        # a stage's release: one mbarrier arrive, no proxy fence (session 46: up to 2.3% per
        # layer); with the escape warp one arrive each way on its buffer
        assert (r["fence"], r["mb_arrive"]) == (0, 1 + 2 * r["ew"]), (name, r)
        # a round's MMAs, each step from zero, their products summed over the S slots into the
        # accumulators (accumulating per slot over a block's rounds was 11% slower at 16 rows,
        # session 46)
        assert r["loop_mma"] == 2 * ws.S * nt * wr, (name, r)
        assert r["loop_fadd"] == 4 * ws.S * nt * wr, (name, r)
        # the ticket's add and reset (TAIL 1); TAIL 2 (x resident in parts) takes none and
        # stores its partials only: the stores of y's tiles are not compiled in
        assert r["atom"] == 2 * ticketed, (name, r)
        if r["tail"] == 2:
            assert 0 < r["st_global"] <= nt, (name, r)
        # PDL: a wait in each partition and one launch_dependents
        assert r["gdc"] == ((4 if r["ew"] else 3) if r["pdl"] else 0), (name, r)


def test_config_and_candidates():
    assert ws.WsConfig().short == "ws3x1" and ws.WsConfig(2, 128, 2).short == "ws2g128x2"
    assert ws.WsConfig(4, ws_tail=1).short == "ws4x1t"
    assert ws.WsConfig(3, ws_ewarp=1).short == "ws3x1w"
    assert ws.WsConfig(3, ws_tail=1, ws_ewarp=1).short == "ws3x1tw"
    # the escape warp's buffer: ws4 no longer fits at 16 rows, ws3 does
    assert ws.fits(ws.WsConfig(3, ws_ewarp=1), 2) and not ws.fits(ws.WsConfig(4, ws_ewarp=1), 2)
    # 17-32 rows: four x tiles a round, 88 KB a stage: two stages fit, three do not
    assert [ws.nt_for(m) for m in (1, 8, 9, 16, 17, 32)] == [1, 1, 2, 2, 4, 4]
    assert ws.fits(ws.WsConfig(2, ws_ewarp=1), 4) and not ws.fits(ws.WsConfig(3, ws_ewarp=1), 4)
    assert not ws.fits(ws.WsConfig(2, 128, 2, ws_ewarp=1), 4)
    assert all(ws.fits(c, 4) and c.ws_ewarp for c in ws.CANDIDATES32)
    assert ws.box3_ok(5120, 5120) and not ws.box3_ok(160, 160) and not ws.box3_ok(5100, 5120)
    for bad in (dict(ws_stages=1), dict(ws_stages=7), dict(ws_grid=3), dict(ws_maxnreg=-1),
                dict(ws_tail=2), dict(ws_ewarp=2)):
        with pytest.raises(ValueError):
            ws.WsConfig(**bad)
    assert ws.smem_bytes(3, 2) == 3 * 7 * 16 * 4 * 32 * 4
    # a ring of 2 stages fits twice per SM at 8 rows, not at 16 (two x tiles per half)
    assert ws.fits(ws.WsConfig(2, 128, 2), 1) and not ws.fits(ws.WsConfig(2, 128, 2), 2)
    assert ws.fits(ws.WsConfig(4), 2) and not ws.fits(ws.WsConfig(5), 2)
    # rounds of 1024 columns (the last one partial)
    assert (ws.n_rounds(17408), ws.n_rounds(1184), ws.n_rounds(1024)) == (17, 2, 1)
    # tail plans on 132 SMs: (whole blocks, splits of each other block, rounds per split)
    t = ws.WsConfig(4, ws_tail=1)
    assert ws.tail_plan(t, 5120, 17408, 132) == (264, 2, 9)     # 320 blocks: 56 split in 2
    assert ws.tail_plan(t, 6656, 4096, 132) == (396, 4, 1)      # 416: 20 in 4 (4 rounds)
    assert ws.tail_plan(t, 16 * 264, 5120, 132) == (264, 1, 5)  # whole waves: no split
    assert ws.tail_plan(t, 1040, 5120, 132) == (0, 2, 3)        # 65 blocks, 5 rounds
    assert ws.tail_plan(t, 272, 6656, 132) == (0, 7, 1)         # 17 blocks, 7 rounds
    assert ws.tail_plan(ws.WsConfig(4), 5120, 17408, 132) == (320, 1, 17)
    assert ws.tail_plan(ws.WsConfig(2, 128, 2, 1), 5120, 17408, 132) == (264, 4, 5)
    # 32-row blocks: 160 on N = 5120, 28 of them split in 4; 80 KB a stage at 16 rows (two
    # fit), 64 KB at 8 (three fit); never above 16 rows
    r2 = ws.WsConfig(2, ws_tail=1, ws_ewarp=1, ws_rows=2)
    assert r2.short == "ws2x1twr2" and ws.corr_slots(1, 2) == 4 and ws.corr_slots(2, 1) == 2
    assert ws.tail_plan(r2, 5120, 17408, 132) == (132, 4, 5)
    assert ws.smem_bytes(2, 2, 2) == 2 * 10 * 16 * 4 * 32 * 4
    assert ws.fits(ws.WsConfig(2, ws_ewarp=1, ws_rows=2), 2)
    assert not ws.fits(ws.WsConfig(3, ws_ewarp=1, ws_rows=2), 2)
    assert ws.fits(ws.WsConfig(3, ws_ewarp=1, ws_rows=2), 1)
    assert not ws.fits(ws.WsConfig(2, ws_ewarp=1, ws_rows=2), 4)
    with pytest.raises(ValueError):
        ws.WsConfig(ws_rows=4)
    # escapes only through the escape warp at 17-32 rows and with 32-row blocks
    assert ws.needs_ewarp(ws.WsConfig(2), 4, True)
    assert ws.needs_ewarp(ws.WsConfig(3, ws_rows=2), 1, True)
    assert not ws.needs_ewarp(ws.WsConfig(3), 2, True)
    assert not ws.needs_ewarp(ws.WsConfig(2), 4, False)
    assert not ws.needs_ewarp(ws.WsConfig(2, ws_ewarp=1, ws_rows=2), 2, True)


def test_x_resident_config_and_shared_memory():
    """ws_xres: 16-row blocks, no tail split of its own; x of every round of K, or of one part
    of K, in shared memory (32 KB a round at 16 rows, 16 KB at 8), so the ring's stages are what
    is left of an SM's."""
    x = ws.WsConfig(2, ws_ewarp=1, ws_xres=1)
    assert x.short == "ws2x1wxr" and ws.WsConfig(3).short == "ws3x1"
    assert ws.WsConfig(4, ws_xres=3).short == "ws4x1xr3"
    for bad in (dict(ws_xres=-1), dict(ws_xres=ws.MAX_XRES_PARTS + 1), dict(ws_xres=1, ws_tail=1),
                dict(ws_xres=1, ws_rows=2)):
        with pytest.raises(ValueError):
            ws.WsConfig(**bad)
    tile = 16 * ws.WK * ws.TILE_W * 4
    assert ws.smem_bytes(2, 2, 1, 5) == (2 * 3 + 5 * 2 * 2) * tile   # 208 KB
    assert ws.smem_bytes(3, 2, 1, 0) == ws.smem_bytes(3, 2)
    with pytest.raises(ValueError, match="needs the weight's K"):
        ws.fits(x, 2)
    # 16 rows: K = 5120 (5 rounds) leaves room for two stages, K = 4096 for three; 6144 none
    assert ws.fits(x, 2, 5120) and not ws.fits(ws.WsConfig(3, ws_ewarp=1, ws_xres=1), 2, 5120)
    assert ws.fits(ws.WsConfig(3, ws_ewarp=1, ws_xres=1), 2, 4096)
    assert not ws.fits(x, 2, 6144)
    # 8 rows, K = 5120: four stages; K not a multiple of 256 (no 3-D boxes): never
    assert ws.fits(ws.WsConfig(4, ws_ewarp=1, ws_xres=1), 1, 5120)
    assert not ws.fits(x, 1, 5120 + 32) and not ws.fits(x, 1, 160)
    # two blocks per SM need two copies of x
    assert not ws.fits(ws.WsConfig(2, 128, 2, ws_xres=1), 1, 5120)
    assert ws.fits(ws.WsConfig(2, 128, 2, ws_xres=1), 1, 1024)
    # parts of K: 16 rows at K = 5120 in two parts (3 rounds resident): four stages fit;
    # K = 19968 (20 rounds) in 7 parts of 3
    assert ws.xres_rounds(ws.WsConfig(4, ws_xres=2), 5120) == 3
    assert ws.fits(ws.WsConfig(4, ws_ewarp=1, ws_xres=2), 2, 5120)
    assert ws.xres_rounds(ws.WsConfig(4, ws_xres=7), 19968) == 3
    assert ws.fits(ws.WsConfig(4, ws_ewarp=1, ws_xres=7), 2, 19968)
    assert not ws.fits(ws.WsConfig(2, ws_ewarp=1, ws_xres=3), 2, 19968)   # 7 rounds


def test_x_resident_plan():
    """(full, splits, rounds per split, programs): whole K on up to one program per SM; in
    parts every block split, on a multiple of the parts (a program keeps one part of x)."""
    one, two, seven = (ws.WsConfig(2, ws_xres=p) for p in (1, 2, 7))
    assert ws.xres_plan(one, 5120, 5120, 132) == (320, 1, 5, 132)
    assert ws.xres_plan(one, 1040, 5120, 132) == (65, 1, 5, 65)
    assert ws.xres_plan(two, 5120, 5120, 132) == (0, 2, 3, 132)
    assert ws.xres_plan(seven, 6656, 19968, 132) == (0, 7, 3, 126)     # 20 rounds: 6 x 3 + 2
    assert ws.xres_plan(seven, 64, 19968, 132) == (0, 7, 3, 28)        # 4 blocks
    # parts that would be empty are dropped: 5 rounds in 4 parts of 2 -> 3 splits
    assert ws.xres_plan(ws.WsConfig(2, ws_xres=4), 5120, 5120, 132) == (0, 3, 2, 132)
    # a K of one round: whole
    assert ws.xres_plan(two, 512, 1024, 132) == (32, 1, 1, 32)
    assert ws.xres_plan(ws.WsConfig(2, 128, 2, ws_xres=3), 5120, 5120, 132) == (0, 3, 2, 264)


def test_chunks_view_is_the_3d_boxes_layout():
    # _chunks(t, start, width)[c, r, w] is t[r, start + 32 c + w]: what a [WK, 16, 32] box at
    # chunk r * WK reads for row block n0 (the producer's 3-D copies)
    t = torch.arange(48 * 512, dtype=torch.int32).view(48, 512)
    v = ws._chunks(t, 256, 256)
    assert v.shape == (8, 48, 32)
    c, r, w = torch.meshgrid(torch.arange(8), torch.arange(48), torch.arange(32), indexing="ij")
    assert torch.equal(v, t[r, 256 + 32 * c + w])
    assert v.data_ptr() == t.data_ptr() + 256 * 4


def test_candidates_add_the_tail_split_where_it_splits(monkeypatch):
    monkeypatch.setattr(ws, "supported", lambda M, K, device: True)
    monkeypatch.setattr(ws._k, "_num_sms", lambda device: 132)
    dev = torch.device("cuda")
    base = tuple(c for c in ws.CANDIDATES if ws.fits(c, 2))
    assert ws.candidates(16, 16 * 264, 5120, dev) == base          # whole waves
    down = ws.candidates(16, 5120, 17408, dev)
    assert down == base + (ws.WsConfig(3, ws_tail=1, ws_ewarp=1),)   # the first base's
    # 1 round (K = 1024): nothing to split
    assert ws.candidates(8, 5120, 1024, dev) == tuple(c for c in ws.CANDIDATES if ws.fits(c, 1))
    # 17-32 rows: CANDIDATES32 and the first one's tail split
    assert ws.candidates(32, 5120, 17408, dev) == ws.CANDIDATES32 + (
        ws.WsConfig(2, ws_tail=1, ws_ewarp=1),)
    assert ws.candidates(17, 16 * 264, 5120, dev) == ws.CANDIDATES32
    # 32-row blocks only with $SPECPILOT_W12_WS_ROWS2=1: the first of CANDIDATES_R2 that fits
    # (ws3 at 8 rows, ws2 at 16) and its tail split where it splits; none above 16 rows
    monkeypatch.setenv(ws.ENV_ROWS2, "1")
    assert ws.candidates(16, 5120, 17408, dev) == down + (
        ws.WsConfig(2, ws_ewarp=1, ws_rows=2), ws.WsConfig(2, ws_tail=1, ws_ewarp=1, ws_rows=2))
    assert ws.candidates(8, 32 * 264, 5120, dev)[-1] == ws.WsConfig(3, ws_ewarp=1, ws_rows=2)
    assert ws.candidates(32, 5120, 17408, dev) == ws.CANDIDATES32 + (
        ws.WsConfig(2, ws_tail=1, ws_ewarp=1),)
    # x resident only with $SPECPILOT_W12_WS_XRES=1, and on all of K only (xres_candidates:
    # the fewest parts of K that fit, most stages, and the fewest with four stages; the parts,
    # slower on an H100, only with =parts, below); none where K % 256 != 0
    monkeypatch.delenv(ws.ENV_ROWS2)
    assert ws.candidates(16, 16 * 264, 5120, dev) == base
    monkeypatch.setenv(ws.ENV_XRES, "1")
    xr = dict(ws_ewarp=1)
    assert ws.candidates(16, 16 * 264, 5120, dev) == base + (ws.WsConfig(2, ws_xres=1, **xr),)
    assert ws.xres_candidates(16, 16 * 264, 5120, dev) == (ws.WsConfig(2, ws_xres=1, **xr),
                                                            ws.WsConfig(4, ws_xres=2, **xr))
    assert ws.candidates(16, 5120, 17408, dev) == down
    assert ws.xres_candidates(8, 16 * 264, 5120, dev) == (ws.WsConfig(4, ws_xres=1, **xr),)
    assert ws.xres_candidates(16, 5120, 17408, dev) == (ws.WsConfig(2, ws_xres=4, **xr),
                                                         ws.WsConfig(4, ws_xres=6, **xr))
    assert ws.xres_candidates(16, 6656, 19968, dev) == (ws.WsConfig(2, ws_xres=4, **xr),
                                                         ws.WsConfig(4, ws_xres=7, **xr))
    assert ws.xres_candidates(16, 8704, 6656, dev) == (ws.WsConfig(3, ws_xres=2, **xr),
                                                        ws.WsConfig(4, ws_xres=3, **xr))
    assert ws.candidates(16, 16 * 264, 5120 + 32, dev) == base
    # $SPECPILOT_W12_WS_XRES=parts: the parts too; a value it does not know is refused
    monkeypatch.setenv(ws.ENV_XRES, "parts")
    assert ws.candidates(16, 5120, 17408, dev) == down + ws.xres_candidates(16, 5120, 17408, dev)
    assert ws.candidates(16, 16 * 264, 5120, dev) == base + ws.xres_candidates(
        16, 16 * 264, 5120, dev)
    monkeypatch.setenv(ws.ENV_XRES, "2")
    with pytest.raises(ValueError, match="expected 0, 1 or parts"):
        ws.candidates(16, 5120, 17408, dev)


def test_17_to_32_rows_need_the_escape_warp_for_escapes(monkeypatch):
    """Above 16 rows the consumers have no escape code of their own (static_assert in the
    kernel): a weight with escapes and a config without the escape warp is refused before any
    launch, as is a config that does not fit, and the register loop takes no more than 16 rows."""
    from specpilot.w12 import kernel as Kn

    monkeypatch.setattr(ws, "supported", lambda M, K, device: True)
    p = Kn.prepare(encode(make_weight(32, 64, 3, n_edges=8)))
    assert p.kent.numel() > 0
    with pytest.raises(ValueError, match="escape warp"):
        ws.w12_ws(torch.randn(20, 64).bfloat16(), p, ws.WsConfig(2))
    with pytest.raises(ValueError, match="shared memory"):
        ws.w12_ws(torch.randn(20, 64).bfloat16(), p, ws.WsConfig(3, ws_ewarp=1))
    with pytest.raises(ValueError, match="at most 16 rows"):
        mma.w12_mma(torch.randn(20, 64).bfloat16(), p, mma.CANDIDATES[0])
    # x resident: 3-D boxes only (K % 256 == 0), and x of all K must fit
    with pytest.raises(ValueError, match="K % 256"):
        ws.w12_ws(torch.randn(8, 64).bfloat16(), p, ws.WsConfig(2, ws_ewarp=1, ws_xres=1))
    big = Kn.prepare(encode(make_weight(32, 8192, 3)))
    with pytest.raises(ValueError, match="x resident"):
        ws.w12_ws(torch.randn(16, 8192).bfloat16(), big, ws.WsConfig(2, ws_ewarp=1, ws_xres=1))
    # 32-row blocks: the same rule at any row count, and at most 16 rows
    with pytest.raises(ValueError, match="escape warp"):
        ws.w12_ws(torch.randn(8, 64).bfloat16(), p, ws.WsConfig(3, ws_rows=2))
    with pytest.raises(ValueError, match="at most 16 rows"):
        ws.w12_ws(torch.randn(20, 64).bfloat16(), p, ws.WsConfig(2, ws_ewarp=1, ws_rows=2))


def test_refuses_without_an_sm90_gpu():
    cpu = torch.device("cpu")
    assert not ws.supported(8, 5120, cpu) and ws.candidates(8, 5120, 5120, cpu) == ()
    if ws.HAS_WS and not torch.cuda.is_available():
        from specpilot.w12 import kernel as K
        from specpilot.w12.format import encode

        p = K.prepare(encode(torch.randn(32, 64).bfloat16()))
        with pytest.raises(ValueError, match="sm_90"):
            ws.w12_ws(torch.randn(4, 64).bfloat16(), p)


def test_w12_mma_runs_a_ws_config_and_the_tune_file_holds_one(tmp_path, monkeypatch):
    from specpilot.w12 import kernel as Kn

    calls = []
    monkeypatch.setattr(ws, "w12_ws", lambda x, p, cfg: calls.append(cfg) or "ws")
    p = Kn.prepare(encode(make_weight(32, 64, 3)))
    assert mma.w12_mma(torch.randn(4, 64).bfloat16(), p, ws.WsConfig(2, 128, 2)) == "ws"
    assert calls == [ws.WsConfig(2, 128, 2)]
    # a tune file with both kinds under "mma-" keys reads back as the same configs
    monkeypatch.setattr(Kn, "_TUNED", {})
    key = Kn.MMA_KEY_PREFIX + "w12|H100|m16|n64|k64"
    Kn._TUNED[key] = ws.WsConfig(4)
    Kn._TUNED[key.replace("m16", "m2")] = mma.MmaConfig(2, 1, 2, 8, esc_mma=1)
    Kn._TUNED[key.replace("m16", "m8")] = ws.WsConfig(4, ws_ewarp=1, ws_xres=3)
    path = str(tmp_path / "tune.json")
    Kn.save_tuning(path)
    Kn._TUNED.clear()
    assert Kn.load_tuning(path) == 3
    assert Kn._TUNED[key] == ws.WsConfig(4)
    assert Kn._TUNED[key.replace("m16", "m8")] == ws.WsConfig(4, ws_ewarp=1, ws_xres=3)
    assert Kn._TUNED[key.replace("m16", "m2")] == mma.MmaConfig(2, 1, 2, 8, esc_mma=1)


def test_sum_parts_adds_the_partials_in_order():
    """sum_parts (the second launch of x resident in parts of K): y = the fp32 sum of ws's
    parts in part order, rounded to bf16, into y's rows at its row stride (a view into a wider
    buffer: the columns past N stay as they were); bad shapes are refused. CPU: the Triton
    interpreter, on integer partials whose sums bf16 holds exactly (its bf16 conversion does
    not round to nearest); on a GPU also random partials against torch's rounding."""
    from specpilot.w12 import kernel as Kn

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu" and not Kn.INTERPRET:
        pytest.skip("needs a GPU or the Triton interpreter")
    g = torch.Generator().manual_seed(0)
    for parts, M, N in ((2, 3, 70), (3, 16, 1100), (6, 1, 5)):
        w = torch.randint(-30, 31, (parts, M, N), generator=g).float()
        if parts >= 3:   # in part order 2^24 + 1 rounds to 2^24, so the column sums to 0
            w[:3, 0, 0] = torch.tensor([2.0 ** 24, 1.0, -2.0 ** 24])
            w[3:, 0, 0] = 0
        cases = [w] + ([torch.randn(parts, M, N, generator=g) * 100] if dev == "cuda" else [])
        for i, w in enumerate(cases):
            w = w.to(dev)
            buf = torch.full((M, N + 8), 7.0, dtype=torch.bfloat16, device=dev)
            y = buf[:, :N]
            assert ws.sum_parts(w, y) is y
            ref = w[0].clone()
            for p in range(1, parts):
                ref += w[p]
            assert torch.equal(y, ref.bfloat16()), (parts, M, N)
            assert (buf[:, N:] == 7.0).all()
            if parts >= 3 and i == 0:
                assert y[0, 0] == 0
    with pytest.raises(ValueError, match="sum_parts"):
        ws.sum_parts(torch.zeros(2, 3, 4, device=dev), torch.zeros(3, 5, dtype=torch.bfloat16,
                                                                    device=dev))


def _sm90() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


@pytest.mark.gpu
@pytest.mark.parametrize("N,K,per_row,narrow", [
    (256, 512, False, False), (300, 1024, False, False), (512, 2048, True, False),
    (1040, 5120, False, False),
    # last rounds partial (K not a multiple of a round's 1024 columns) and N not of 16, weights
    # in [1, 2) (a zero-filled plane word that decoded to a large value would show)
    (64, 64, False, True), (96, 160, False, True), (272, 6656, False, True)])
def test_matches_torch_on_gpu(N, K, per_row, narrow):
    if not _sm90():
        pytest.skip("the warp-specialized kernel runs on sm_90")
    from specpilot.w12 import kernel as Kn

    # 2e-3 of the weights escape (edge values: +-Inf, NaN, subnormals, ...): several chunks per
    # row block at K = 5120
    x = (torch.rand(N, K) + 1).bfloat16() if narrow else make_weight(N, K, N + K, per_row,
                                                                        n_edges=N * K // 500)
    p = Kn.prepare(encode(x, per_row=per_row), "cuda")
    esc = p.kent.numel() > 0
    for cfg in ws.CANDIDATES + TAIL_CONFIGS + NT4_CONFIGS + R2_CONFIGS + X_CONFIGS:
        for M in (1, 2, 3, 7, 8, 9, 16, 17, 24, 32):
            nt = ws.nt_for(M)
            if ws.fits(cfg, nt, K) and not ws.needs_ewarp(cfg, nt, esc):
                a = acts(M, K, M)
                check_close(ws.w12_ws(a.cuda(), p, cfg), a, x)
    # x contiguous but not 16-byte aligned (a view 2 bytes into a buffer): copied for TMA
    a = acts(5, K, 5)
    buf = torch.empty(5 * K + 1, dtype=torch.bfloat16, device="cuda")
    xv = buf[1:].view(5, K)
    xv.copy_(a)
    check_close(ws.w12_ws(xv, p), a, x)


@pytest.mark.gpu
def test_tuner_offers_ws_on_sm90(monkeypatch):
    if not _sm90():
        pytest.skip("the warp-specialized kernel runs on sm_90")
    from specpilot.w12 import kernel as Kn

    monkeypatch.setattr(Kn, "_TUNED", {})
    x = make_weight(512, 1024, 5)
    p = Kn.prepare(encode(x), "cuda")
    a = acts(16, 1024, 3)
    seen = []
    real = Kn.fastest
    monkeypatch.setattr(Kn, "fastest", lambda c, *r: seen.extend(c) or real(c, *r))
    cfg = mma.mma_autotune(a.cuda(), p)
    assert set(ws.candidates(16, 512, 1024, torch.device("cuda"))) <= set(seen)
    assert ws.candidates(16, 512, 1024, torch.device("cuda"))
    check_close(mma.w12_mma(a.cuda(), p, cfg), a, x)
    # 17-32 rows: only ws's candidates; w12_matmul routes them there with $SPECPILOT_W12_WS32
    seen.clear()
    a = acts(24, 1024, 4)
    cfg = mma.mma_autotune(a.cuda(), p)
    assert seen == list(ws.candidates(24, 512, 1024, torch.device("cuda"))) and cfg in seen
    check_close(mma.w12_mma(a.cuda(), p), a, x)
    monkeypatch.setattr(mma, "w12_mma", lambda x, p: "ws route")
    assert Kn.w12_matmul(a.cuda(), p) != "ws route"    # off by default: the template GEMM
    monkeypatch.setenv(ws.ENV_WS32, "1")
    assert Kn.w12_matmul(a.cuda(), p) == "ws route"


@pytest.mark.gpu
def test_gpu_graph_with_pdl_equals_without(monkeypatch):
    """A chain of norm -> W12 layers on ws (every candidate at 8 and 16 rows, the 32-row
    blocks' and x resident's among them, x resident in two parts of K with its second launch,
    sum_parts) and on the register loop gives the same bits eagerly and in a CUDA graph (the
    TMA descriptors captured with the launches), with PDL off (pdl.ENABLED) and on (ws.WS_PDL,
    the default)."""
    from specpilot.kernels import norm
    from specpilot.w12 import kernel as Kn

    if not _sm90():
        pytest.skip("the warp-specialized kernel runs on sm_90")
    monkeypatch.setattr(ws, "WS_PDL", True)
    D = 2048
    cfgs = (ws.CANDIDATES + ws.CANDIDATES_R2 + ws.CANDIDATES_X[1:]
            + (ws.WsConfig(4, ws_ewarp=1, ws_xres=2), mma.MmaConfig(2, 1, 2, 8, esc_mma=1)))
    layers = [Kn.prepare(encode(make_weight(D, D, i, edges=FINITE_EDGE, n_edges=200)), "cuda")
              for i in range(len(cfgs))]
    nw = torch.randn(D, device="cuda").bfloat16()
    for M in (8, 16):
        x0 = acts(M, D, M).cuda()

        def chain():
            h, outs = x0, []
            for i, p in enumerate(layers):
                cfg = cfgs[i % len(cfgs)]
                if isinstance(cfg, ws.WsConfig) and not ws.fits(cfg, ws.nt_for(M), D):
                    cfg = ws.CANDIDATES[0]
                h = mma.w12_mma(norm.rms_norm(h, nw, 1e-6), p, cfg)
                outs.append(h)
            return outs

        check_pdl_modes(monkeypatch, chain, ((0, 0), (1, 2), (2, 2)))


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    print(json.dumps(_compile_all()))
