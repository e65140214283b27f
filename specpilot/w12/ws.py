"""Warp-specialized W12 GEMM for few activation rows (M <= 32) on sm_90: TMA ring + MMA consumers.

Why: the few-row kernel of ``mma.py`` holds its look-ahead (the next round's plane and x words)
in registers, which run out at 9-16 rows (254 registers at k2s8, NT 2), and three attempts to
stage its data in shared memory from the same warps lost (docs/w12.md). Here the two jobs are in
different warps (``gl.warp_specialize``): one producer warp moves each round's planes and x into a
ring of shared-memory stages with TMA (completion on mbarriers), and the ``WK`` = 4 consumer
warps only read shared memory, decode (``kernel.DECODE_PTX``) and run ``mma.sync.m16n8k16`` as
``mma.py`` does (the same relabelled K, layouts P / Q / X, S = 8 H words per lane and round).

* Persistent: ``grid`` programs (the SM count, or twice it with ``WsConfig.ws_grid`` 2) walk the
  items ``pid, pid + grid, ...``; the producer streams the next item's first rounds while the
  consumers finish one (the cross-warp sum, the escapes, the stores). An item is a 16-row block,
  or with ``ws_tail`` for the blocks of the last, partial wave a run of a block's rounds
  (``tail_plan``): fp32 partials in a workspace, a ticket per block, the last item to finish adds
  them in split order (the register loop's split-K). Splitting every block that way was slower
  on every layer (session 45: each item waits for its partials and ticket).
* Per stage and consumer warp ``w`` (K split over the warps inside a round as in mma.py): the H,
  L-first-half and L-second-half tiles ``[16, 32]`` int32 (rows: the block's 16 weight rows;
  H words ``j + 32 w ..``), and per half and 8-token tile two x boxes ``[8, 32]`` (x words
  ``2 j + 64 w + 32 b ..``), stacked into ``[16 WK, 32]`` buffers, all with the 128-byte swizzle:
  each consumer read (16 bytes per lane) is free of bank conflicts. MMA row slot ``g`` is weight
  row ``g`` and slot ``g + 8`` row ``g + 8`` (mma.py pairs adjacent rows for its global loads;
  in shared memory that would conflict).
* Each plane half and x half has its own TMA descriptor over a strided view, so the last partial
  round and the rows past N read zeros (TMA fills outside the view with 0; a zero H word decodes
  to a finite value, times x = 0). K % 32 == 0 keeps the second halves' bases 16-byte aligned.
  Where K % 256 == 0 (``box3_ok``) the views are 3-D, [32-word chunks, rows, 32], and a round
  takes one box per plane and per x half and 8-token tile (7 copies at 16 rows instead of 44);
  the stage buffers are reinterpreted as the boxes' shape (the same bytes and swizzle).
* A stage goes back to the producer with one mbarrier arrive after the consumers' reads, no
  proxy fence (its release orders the reads, as a TMA pipeline's consumer release does; the
  fence cost up to 2.3% per layer at 16 rows, session 46).
* Escapes decode to +0. With ``ws_ewarp`` (the first candidate) a third partition, one escape
  warp (``_esc_worker``), computes each block's exact escape products as m16n8k16 MMAs one block
  ahead of the consumers and hands them over through a shared buffer (``corr``, mbarriers
  ``cfull`` / ``cfree``); the consumers add them in the cross-warp sum. Without it (a block's
  escape code in the consumers' stream cost 2-19% per layer at 16 rows, session 47) the
  consumers add them per block after its main loop as tensor-core MMAs (mma.py's ``esc_mma``:
  16 entries per warp and chunk, bf16 x bf16 exact in fp32). A block's first chunk is loaded
  during the previous block and its x gathered during its own main loop; further chunks (> 64
  escapes in a block) load after the loop. Not bit-equal to a bf16 GEMM (fast mode only).
* The cross-warp sum (K is split over the warps): each warp stores its partial 16 x 8 tiles
  into a buffer of its own ([WK, 16, 8] fp32, ``SUM_BYTES``), and after one barrier each thread
  adds the WK partials of one output and stores it: two named barriers per 8 tokens, where
  ``gl.sum`` over the warps took six (1-5% faster per layer, session 45).
* 17-32 rows (``NT`` 4, session 48; correct on the H200 but 0.71-0.79x of cuBLAS per token,
  session 49, so ``w12_matmul`` routes them here only with ``$SPECPILOT_W12_WS32=1``): four
  8-token x tiles a round, the second 16-token half's MMAs on the same decoded words
  (``_round``), four cross-warp sums and stores; 88 KB a stage, so two stages
  (``CANDIDATES32``); escapes only through the escape warp (two passes over each chunk, x rows
  16-31 in the second).
* Blocks of 32 weight rows (``WsConfig.ws_rows`` 2, session 49, at 1-16 rows; off the tuner
  unless ``$SPECPILOT_W12_WS_ROWS2=1``: no faster on an H100, not yet timed on an H200): an
  item is two adjacent 16-row blocks whose planes share a stage and one copy of the round's
  x, so L2 delivers x once for twice the weight (per weight byte 1.67 bytes from L2 at 16
  rows instead of 2.33: session 49's profile on the H200 put the 16-row kernel at about L2's
  bandwidth, docs/w12.md). The second block's accumulators are the NT 4 ones (``ccc`` /
  ``dcc``), its outputs the third and fourth 8-token slots (rows + 16); escapes only through
  the escape warp (one pass per block).
* x resident (``WsConfig.ws_xres`` = P >= 1, sessions 52-53; off the tuner unless
  ``$SPECPILOT_W12_WS_XRES=1``): K in P parts of ``XR`` = ceil(rounds / P) rounds, and x of a
  program's part stays in shared memory for the whole launch (its own [2 XR, 16 WK NT, 32]
  buffers). The producer loads a round's x only in the program's first item, with its planes,
  on the same stage barrier; later items stream planes only and the consumers read the part's
  round r from buffers 2 r, 2 r + 1. L2 then delivers about 1 byte per weight byte plus x once
  per program (16 rows: 2.33 otherwise), for fewer ring stages (x takes 32 KB a round at 16
  rows: whole K = 5120 leaves room for two stages of 24 KB; in two parts, four). 16-row blocks,
  the 3-D boxes (K % 256 == 0), no tail split of its own. With P > 1 (to reach K >= 6144 at 16
  rows) every block is split into the parts (``xres_plan``) on a multiple of P programs, so
  that a program's items all share one part; each item stores its fp32 partials (``TAIL`` 2)
  and a second, PDL-chained launch (``sum_parts``) adds them in part order into y (H100,
  session 54: correct, in the PDL graph chain too, but slower than today's candidates at 16
  rows, o_proj 1.14x and down 1.26-2.0x the time: the tuner offers them only with
  ``$SPECPILOT_W12_WS_XRES=parts``, ``candidates``; not yet timed on an H200). H100
  (session 52): whole K even with the candidates above (not held by L2 there); in parts with a
  ticket per block instead (the tail split's way) 1.13-1.73x slower: each item waited for its
  partials' fence and ticket, about 2 us.
* PDL (``kernels/pdl.py``): the producer waits (``griddepcontrol.wait``) before its first copy,
  the consumers before their first read of x or write of y; the next kernel may launch after the
  consumers' last block (``WS_PDL``; ``test_gpu_graph_with_pdl_equals_without`` checks a CUDA
  graph of PDL launches against one without, session 45).

Measured (H100, session 47, docs/benchmarks/w12.md): per token of the linear layers at 16 rows,
taking the faster of ws and the register loop per layer, 1.281x of cuBLAS on Qwen3.8-27B and
1.313x on Muse-Glimmer-30B (1.218x / 1.256x without the escape warp, 1.110x / 1.219x for the
register loop alone, same run); at 8 rows 1.353x / 1.343x. The tuner picks the faster kernel per
layer. GPU only (sm_90: TMA, setmaxnreg, mbarriers); on CPU the tests compile it for sm_90.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace

import torch

from ..kernels import pdl as _pdl
from . import kernel as _k
from . import mma as _mm
from .kernel import GROUP, IDX_ROWS, W12Planes, _cdiv

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
except ImportError:  # no Triton, or one without Gluon's Hopper ops: supported() says False
    gluon = None
    gl = None

HAS_WS = gluon is not None and _mm.HAS_GLUON
WK = 4          # consumer warps (a warp-specialized kernel's default partition: a multiple of 4)
S = 8           # H words per lane and round: one 128-byte tile row per warp
TILE_W = 32     # int32 words per tile row (the 128-byte swizzle's width)
MAX_M = 32       # 17-32 rows (NT 4) only behind $SPECPILOT_W12_WS32 in w12_matmul (ws32_enabled)
ENV_WS32 = "SPECPILOT_W12_WS32"
ENV_ROWS2 = "SPECPILOT_W12_WS_ROWS2"   # the tuner offers CANDIDATES_R2 (ws_rows_enabled)
ENV_XRES = "SPECPILOT_W12_WS_XRES"    # the tuner offers xres_candidates (xres_mode)
MAX_XRES_PARTS = 12   # WsConfig.ws_xres: parts of K at most
WS_PDL = True    # launch with programmatic dependent launch (see the module notes)
BLOCK_SMEM = 232448   # bytes of shared memory one block may use on an H100 / H200
SM_SMEM = 233472     # ... and one SM holds (each block also takes 1 KB of it for the system)
SMEM_EXTRA = 256     # the kernel's own bytes besides the ring and SUM_BYTES (mbarriers)
SUM_BYTES = WK * 16 * 8 * 4   # the cross-warp sums' buffer: [WK, 16 rows, 8 tokens] fp32
CORR_BYTES = 16 * 8 * 4       # ws_ewarp: a block's escape products per 8-token tile, fp32
                              # (and 16-row block: corr_slots)


@dataclass(frozen=True)
class WsConfig:
    """ws_stages: shared-memory ring stages (rounds in flight); ws_maxnreg: a register cap per
    thread for the launch (0: none, then one block per SM); ws_grid: programs per SM (2 needs
    the cap and two blocks' ring in shared memory); ws_tail 1: the blocks of the last, partial
    wave are split over K so that every program has work in it (``tail_plan``; split-K as
    ``MmaConfig.split``: fp32 partials in a workspace, the last to finish adds them in split
    order); ws_ewarp 1: a warp of their own (the escape warp) computes each block's escape
    products ahead of the consumers, who add them in the cross-warp sum; ws_rows 2: blocks of
    32 weight rows (two 16-row blocks on one copy of x a round; at most 16 activation rows);
    ws_xres P >= 1: x resident in shared memory, loaded once per program: all of K (P = 1) or
    one of P parts of K, every block split into them (16-row blocks, ws_tail 0: ``xres_plan``).
    Prefixed names: tune files hold these next to ``mma.MmaConfig`` entries under the same
    keys."""
    ws_stages: int = 3
    ws_maxnreg: int = 0
    ws_grid: int = 1
    ws_tail: int = 0
    ws_ewarp: int = 0
    ws_rows: int = 1
    ws_xres: int = 0

    def __post_init__(self):
        if not (2 <= self.ws_stages <= 6 and self.ws_maxnreg >= 0 and self.ws_grid in (1, 2)
                and self.ws_tail in (0, 1) and self.ws_ewarp in (0, 1)
                and self.ws_rows in (1, 2) and 0 <= self.ws_xres <= MAX_XRES_PARTS
                and not (self.ws_xres and (self.ws_tail or self.ws_rows == 2))):
            raise ValueError(f"WsConfig: bad values {self}")

    @property
    def short(self) -> str:
        reg = f"g{self.ws_maxnreg}" if self.ws_maxnreg else ""
        return (f"ws{self.ws_stages}{reg}x{self.ws_grid}" + ("t" if self.ws_tail else "")
                + ("w" if self.ws_ewarp else "") + ("r2" if self.ws_rows == 2 else "")
                + ("xr" if self.ws_xres == 1 else f"xr{self.ws_xres}" if self.ws_xres
                   else ""))


def nt_for(M: int) -> int:
    """8-token x tiles a round at M rows: 1 (M <= 8), 2 (<= 16) or 4 (<= 32: two 16-token
    halves on the same decoded weights)."""
    return 1 if M <= 8 else 2 if M <= 16 else 4


def ws32_enabled() -> bool:
    """Whether ``w12_matmul`` routes 17-32 rows to ws (``$SPECPILOT_W12_WS32`` = 1; off by
    default: slower than cuBLAS bf16 there, session 49, docs/benchmarks/w12.md)."""
    return os.environ.get(ENV_WS32, "0") == "1"


def ws_rows_enabled() -> bool:
    """Whether the tuner offers ``CANDIDATES_R2`` (``$SPECPILOT_W12_WS_ROWS2`` = 1; off by
    default: no faster on an H100, session 50; not yet timed on an H200)."""
    return os.environ.get(ENV_ROWS2, "0") == "1"


def xres_mode() -> int:
    """Which x-resident configs the tuner offers (``$SPECPILOT_W12_WS_XRES``): 0 none (the
    default: built in session 52, even with today's kernel on an H100, not yet timed on an
    H200), 1 those of ``xres_candidates`` on all of K, ``parts`` (2) those in parts of K too
    (built in session 53; correct on an H100 but slower there, session 54). Any other value
    is refused."""
    value = os.environ.get(ENV_XRES, "0").strip().lower()
    modes = {"0": 0, "": 0, "1": 1, "parts": 2}
    if value not in modes:
        raise ValueError(f"${ENV_XRES}={value!r}: expected 0, 1 or parts")
    return modes[value]


def smem_bytes(stages: int, nt: int, rows: int = 1, xr: int = 0) -> int:
    """The ring's bytes: per stage 3 ``rows`` plane tiles and 2 nt x tiles of [16 WK, 32]
    int32; with xr > 0 (x resident) the x tiles are per round of K instead (xr rounds)."""
    return (stages * 3 * rows + (xr or stages) * 2 * nt) * 16 * WK * TILE_W * 4


def corr_slots(nt: int, rows: int) -> int:
    """The escape warp's [16 x 8] fp32 tiles per item: one per 8-token tile (nt) and 16-row
    block; with 32-row blocks always four (the consumers' slots 0-3)."""
    return 4 if rows == 2 else nt


# the tuning space (sessions 44-45, H100: ws4 won most layers at 16 rows, ws3 most at 8 rows,
# ws2 g128 x2 Muse-Glimmer's o_proj and down at 8; ws2 without a cap won none and was dropped;
# session 47: with the escape warp ws3 won 17 of the 22 layer / row-count pairs of both models,
# ws2 g128 x2 five at 8 rows; without it ws3 / ws4 stay for the lm_heads at 16 rows)
CANDIDATES = (WsConfig(3, ws_ewarp=1), WsConfig(3), WsConfig(4), WsConfig(2, 128, 2, ws_ewarp=1))
# 17-32 rows (NT 4: 88 KB a stage, two stages fit): escapes only through the escape warp
CANDIDATES32 = (WsConfig(2, ws_ewarp=1),)
# 32-row blocks (escapes only through the escape warp; 64 KB a stage at 8 rows, 80 KB at 16),
# with the tuner only where ws_rows_enabled()
CANDIDATES_R2 = (WsConfig(3, ws_ewarp=1, ws_rows=2), WsConfig(2, ws_ewarp=1, ws_rows=2))
# x resident (ws_xres), with the escape warp, most stages first: xres_candidates
CANDIDATES_X = tuple(WsConfig(s, ws_ewarp=1, ws_xres=1) for s in (4, 3, 2))
# ws_tail offered on the first TAIL_BASES bases where it splits (the down and o_proj layers have
# 320-416 blocks of 16 rows, 2.4-3.2 per SM: their last wave ran 40-80% full; session 45 call 6:
# it won the downs at 16 rows by 4-9% and lost 2-8% elsewhere; session 47: ws3 with the escape
# warp and the tail split won both downs at 16 rows)
TAIL_BASES = 1


def supported(M: int, K: int, device: torch.device) -> bool:
    """Whether ``w12_ws`` runs x [M, K] here: Gluon with Hopper's TMA ops, an sm_90 GPU,
    1 <= M <= MAX_M, K % 32 == 0."""
    return (HAS_WS and device.type == "cuda" and 1 <= M <= MAX_M and K % 32 == 0
            and torch.cuda.get_device_capability(device)[0] == 9)


def fits(cfg: WsConfig, nt: int, K: int | None = None) -> bool:
    """Whether cfg's blocks fit: one in a block's shared memory, ws_grid of them in an SM's
    (32-row blocks: at most 16 activation rows). With ws_xres the weight's K is needed (x of
    ``xres_rounds`` rounds is resident), and K % 256 == 0 (the 3-D boxes, ``box3_ok``)."""
    if cfg.ws_rows == 2 and nt == 4:
        return False
    xr = 0
    if cfg.ws_xres:
        if K is None:
            raise ValueError("fits: a ws_xres config needs the weight's K")
        if not box3_ok(K, _cdiv(K, 32) * 32):
            return False
        xr = xres_rounds(cfg, K)
    need = (smem_bytes(cfg.ws_stages, nt, cfg.ws_rows, xr) + SMEM_EXTRA + SUM_BYTES
            + cfg.ws_ewarp * (corr_slots(nt, cfg.ws_rows) * CORR_BYTES
                              + SMEM_EXTRA))   # (its mbarriers: SMEM_EXTRA)
    return need <= BLOCK_SMEM and cfg.ws_grid * (need + 1024) <= SM_SMEM


def needs_ewarp(cfg: WsConfig, nt: int, esc: bool) -> bool:
    """Whether cfg at nt 8-token tiles needs the escape warp it lacks for a weight with (esc)
    escapes: the consumers have no escape code of their own at 17-32 rows (NT 4) or with
    32-row blocks (static_assert in the kernel)."""
    return esc and not cfg.ws_ewarp and (nt == 4 or cfg.ws_rows == 2)


def n_rounds(K: int) -> int:
    """Rounds of a block on K columns (padded to 32: format.PAD_K): TILE_W H words per consumer
    warp, so 1024 columns a round."""
    return _cdiv(_cdiv(K, 32) * 4, TILE_W * WK)


def xres_rounds(cfg: WsConfig, K: int) -> int:
    """Rounds of x a ws_xres config keeps resident: K's rounds in ws_xres parts (the last
    part may be shorter)."""
    return _cdiv(n_rounds(K), cfg.ws_xres)


def xres_plan(cfg: WsConfig, N: int, K: int, n_sm: int) -> tuple:
    """(full, splits, rounds per split, programs) of a ws_xres config on an N x K weight: one
    part (blocks whole, up to ws_grid programs per SM), or every block split into ``splits``
    parts of ``xres_rounds`` rounds (parts that would be empty dropped) on a multiple of
    ``splits`` programs, so that each program keeps one part of x (its items' split index is
    its id modulo ``splits``)."""
    rps = xres_rounds(cfg, K)
    splits = _cdiv(n_rounds(K), rps)
    blocks, progs = _cdiv(N, 16), cfg.ws_grid * n_sm
    if splits == 1:
        return blocks, 1, rps, min(blocks, progs)
    return 0, splits, rps, min(blocks * splits, progs // splits * splits)


def tail_plan(cfg: WsConfig, N: int, K: int, n_sm: int) -> tuple:
    """(full, splits, rounds per split) of cfg on an N x K weight: blocks [0, full) run whole;
    with ws_tail each of the last wave's blocks (n_blocks - full < programs) is split into
    ``splits`` runs of whole rounds so that the wave has about one item per program."""
    blocks, progs, rounds = _cdiv(N, 16 * cfg.ws_rows), cfg.ws_grid * n_sm, n_rounds(K)
    full = blocks - blocks % progs
    if not cfg.ws_tail or full == blocks:
        return blocks, 1, rounds
    rps = _cdiv(rounds, min(progs // (blocks - full), rounds))
    splits = _cdiv(rounds, rps)
    return (full, splits, rps) if splits > 1 else (blocks, 1, rounds)


def candidates(M: int, N: int, K: int, device: torch.device) -> tuple:
    """The configs of CANDIDATES that fit at M rows, where supported, and the first TAIL_BASES
    of them with ws_tail where it splits the N x K weight's last wave; with ws_rows_enabled()
    also the first of CANDIDATES_R2 that fits, and its tail split likewise; with
    xres_mode() 1 also those of ``xres_candidates`` on all of K (``ws_xres`` 1), with 2 those
    in parts of K too (correct on an H100 but slower there, session 54; the bench's ``--xres``
    times them all)."""
    if not supported(M, K, device):
        return ()
    nt = nt_for(M)
    n_sm = _k._num_sms(device)
    out = []
    groups = [CANDIDATES32 if nt == 4 else CANDIDATES]
    if ws_rows_enabled():
        groups.append(CANDIDATES_R2)
    for group in groups:
        fit = [c for c in group if fits(c, nt)]
        if group is CANDIDATES_R2:
            fit = fit[:1]
        tails = [replace(c, ws_tail=1) for c in fit[:TAIL_BASES]]
        out += fit + [c for c in tails if tail_plan(c, N, K, n_sm)[1] > 1]
    mode = xres_mode()
    if mode:   # 1: whole K only (the parts, TAIL 2, were slower on an H100); 2: the parts too
        out += [c for c in xres_candidates(M, N, K, device) if mode == 2 or c.ws_xres == 1]
    return tuple(out)


def xres_candidates(M: int, N: int, K: int, device: torch.device) -> tuple:
    """x resident at M rows on an N x K weight, where supported: the fewest parts of K with
    which a config of CANDIDATES_X fits (its most stages), and the fewest with which the first
    (four stages) fits, where that differs."""
    if not supported(M, K, device):
        return ()
    nt, out = nt_for(M), []
    for parts in range(1, MAX_XRES_PARTS + 1):
        fit = [v for v in (replace(c, ws_xres=parts) for c in CANDIDATES_X) if fits(v, nt, K)]
        if fit and not out:
            out.append(fit[0])
        if fit and fit[0].ws_stages == CANDIDATES_X[0].ws_stages:
            if fit[0] != out[0]:
                out.append(fit[0])
            break
    return tuple(out)


if HAS_WS:
    _TW = gl.constexpr(TILE_W)
    _S = gl.constexpr(S)
    # a TMA load: async_copy_global_to_shared in triton 3.6 (the GPU machine's), async_load from
    # 3.7 on (the old name raises there)
    _tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared

    # a shared buffer's reinterpretation: _reinterpret in triton 3.6 (the GPU machine's),
    # reinterpret from 3.7 on
    if hasattr(gl.shared_memory_descriptor, "reinterpret"):
        @gluon.jit
        def _box3(buf, C: gl.constexpr, R: gl.constexpr, L3: gl.constexpr):
            """A ring buffer [C R, 32] as the [C, R, 32] box of a 3-D descriptor (layout L3): the
            same bytes, 128-byte rows in the same order, so the same swizzle."""
            return buf.reinterpret(gl.int32, [C, R, _TW], L3)
    else:
        @gluon.jit
        def _box3(buf, C: gl.constexpr, R: gl.constexpr, L3: gl.constexpr):
            """(triton 3.6's name.)"""
            return buf._reinterpret(gl.int32, [C, R, _TW], L3)

    @gluon.jit
    def _copy_x(xa_desc, xb_desc, xsa, xsb, j, bar, WK: gl.constexpr, NT: gl.constexpr):
        """Round j's x words of both halves into the stage's x buffers xsa / xsb, rows
        16 WK tt + 16 w + 8 b + t: x words 2 j + 64 w + 32 b .. + 32 of token 8 tt + t."""
        for tt in gl.static_range(NT):
            for w in gl.static_range(WK):
                for b in gl.static_range(2):
                    col = 2 * j + 64 * w + 32 * b
                    _tma_load(xa_desc, [8 * tt, col], bar,
                              xsa.slice(16 * WK * tt + 16 * w + 8 * b, 8))
                    _tma_load(xb_desc, [8 * tt, col], bar,
                              xsb.slice(16 * WK * tt + 16 * w + 8 * b, 8))

    @gluon.jit
    def _x_boxes(xa_desc, xb_desc, xs, xi, r, bar, WK: gl.constexpr, NT: gl.constexpr,
                 L3: gl.constexpr):
        """Round r's x, one 3-D box per half and 8-token tile, into x buffers 2 xi, 2 xi + 1."""
        for tt in gl.static_range(NT):
            _tma_load(xa_desc, [2 * r * WK, 8 * tt, 0], bar, _box3(
                xs.index(2 * xi).slice(16 * WK * tt, 16 * WK), 2 * WK, 8, L3))
            _tma_load(xb_desc, [2 * r * WK, 8 * tt, 0], bar, _box3(
                xs.index(2 * xi + 1).slice(16 * WK * tt, 16 * WK), 2 * WK, 8, L3))

    @gluon.jit
    def _producer(h_desc, la_desc, lb_desc, xa_desc, xb_desc, hs, las, lbs, xs, ready, empty,
                  n_items, n_rounds, full, splits, rps, WK: gl.constexpr, NT: gl.constexpr,
                  NS: gl.constexpr, PDL: gl.constexpr, BOX3: gl.constexpr, WR: gl.constexpr,
                  XR: gl.constexpr = 0):
        """The producer warp: every (item, round) of the program into ring stage i % NS once
        the consumers have released it (_item); with WR 2 both 16-row blocks' planes (plane
        buffers WR st, WR st + 1) and one copy of x; with XR (x resident, BOX3 only) x of round
        r into x buffers 2 (r - r0), 2 (r - r0) + 1 in the program's first item only (every
        item of a program has the same K part, xres_plan)."""
        pid = gl.program_id(0)
        npg = gl.num_programs(0)
        pbytes: gl.constexpr = 3 * WR * 16 * WK * _TW * 4
        xbytes: gl.constexpr = 2 * NT * 16 * WK * _TW * 4
        _mm._gdc_wait(PDL > 0)
        i = 0
        for it in range(pid, n_items, npg):
            tile, sp, r0, r1 = _item(it, full, splits, rps, n_rounds)
            n0 = tile * (16 * WR)
            for r in range(r0, r1):
                st = i % NS
                mbarrier.wait(empty.index(st), ((i // NS) & 1) ^ 1)
                bar = ready.index(st)
                if XR:
                    if it == pid:
                        mbarrier.expect(bar, pbytes + xbytes)
                    else:
                        mbarrier.expect(bar, pbytes)
                else:
                    mbarrier.expect(bar, pbytes + xbytes)
                if BOX3:   # one box per plane and x half / 8-token tile (3-D descriptors)
                    L3: gl.constexpr = h_desc.layout
                    for b in gl.static_range(WR):
                        _tma_load(h_desc, [r * WK, n0 + 16 * b, 0], bar,
                                  _box3(hs.index(WR * st + b), WK, 16, L3))
                        _tma_load(la_desc, [r * WK, n0 + 16 * b, 0], bar,
                                  _box3(las.index(WR * st + b), WK, 16, L3))
                        _tma_load(lb_desc, [r * WK, n0 + 16 * b, 0], bar,
                                  _box3(lbs.index(WR * st + b), WK, 16, L3))
                    if XR:
                        if it == pid:
                            _x_boxes(xa_desc, xb_desc, xs, r - r0, r, bar, WK, NT, L3)
                    else:
                        _x_boxes(xa_desc, xb_desc, xs, st, r, bar, WK, NT, L3)
                else:
                    j = r * (_TW * WK)
                    for b in gl.static_range(WR):
                        for w in gl.static_range(WK):
                            c = j + _TW * w
                            _tma_load(h_desc, [n0 + 16 * b, c], bar,
                                      hs.index(WR * st + b).slice(16 * w, 16))
                            _tma_load(la_desc, [n0 + 16 * b, c], bar,
                                      las.index(WR * st + b).slice(16 * w, 16))
                            _tma_load(lb_desc, [n0 + 16 * b, c], bar,
                                      lbs.index(WR * st + b).slice(16 * w, 16))
                    _copy_x(xa_desc, xb_desc, xs.index(2 * st), xs.index(2 * st + 1), j, bar, WK,
                            NT)
                i += 1

    @gluon.jit
    def _planes(buf, LP: gl.constexpr, P: gl.constexpr):
        """A [16 WK, 32] plane buffer -> [WK, 8, 2, 4, S] in P (slot g: row g, g + 8: row
        g + 8)."""
        WK: gl.constexpr = buf.shape[0] // 16
        v = buf.load(LP)
        v = gl.permute(gl.reshape(v, [WK, 2, 8, 4, 8]), [0, 2, 1, 3, 4])
        return gl.convert_layout(v, P, assert_trivial=True)

    @gluon.jit
    def _xtile(buf, LX: gl.constexpr, X: gl.constexpr):
        """A [16 WK, 32] x buffer (rows 16 w + 8 b + t) -> [WK, 8, 4, 16] in X (lane 4 t + 2 b
        + c0 holds words 32 b + 16 c0 .. + 16 of its warp's 64)."""
        WK: gl.constexpr = buf.shape[0] // 16
        v = buf.load(LX)
        v = gl.permute(gl.reshape(v, [WK, 2, 8, 2, 16]), [0, 2, 1, 3, 4])
        return gl.convert_layout(gl.reshape(v, [WK, 8, 4, 16]), X, assert_trivial=True)

    @gluon.jit
    def _rows16(a01, a23):
        """[W, 8 (g), 2 (p), 4 (c)] tiles of rows g (a01) and g + 8 (a23) -> [W, 16 (row), 2,
        4]."""
        a = gl.permute(gl.join(a01, a23), [0, 4, 1, 2, 3])         # [W, 2, 8, 2, 4]
        return gl.reshape(a, [a01.shape[0], 16, 2, 4])

    @gluon.jit
    def _cross_sum(red, a01, a23, RL: gl.constexpr):
        """The sums over the WK warps of a01 (rows g) and a23 (rows g + 8), each [WK, 8 (g), 2
        (p), 4 (c)] in ACC (token 2 c + p): stored into red [WK, 16 (row), 2, 4], read back with
        the warps' partials in each thread's registers (RL), summed: [16, 2, 4] (row, p, c) in
        RL's slice, with _out_index's rows and tokens."""
        red.store(_rows16(a01, a23))
        return gl.sum(red.load(RL), axis=0)

    @gluon.jit
    def _out_index(RL: gl.constexpr):
        """(row [16, 1, 1], token [1, 2, 4]) of _cross_sum's outputs in a 16 x 8 tile."""
        SL: gl.constexpr = gl.SliceLayout(0, RL)
        r = gl.arange(0, 16, layout=gl.SliceLayout(1, gl.SliceLayout(2, SL)))
        p = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(2, SL)))
        c = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, SL)))
        return r[:, None, None], 2 * c[None, None, :] + p[None, :, None]

    @gluon.jit
    def _store_out(y_ptr, sym, v, v1, v2, v3, row, tok, ok, ok1, ok2, ok3, NT: gl.constexpr,
                   WR: gl.constexpr = 1):
        """y at (tokens tok, rows row) from v and, with NT >= 2, at tokens tok + 8 from v1; with
        NT 4 also at tok + 16, tok + 24 from v2, v3; with WR 2 at rows row + 16 from v2 (tokens
        tok) and, with NT 2, v3 (tok + 8)."""
        gl.store(y_ptr + tok * sym + row, v.to(gl.bfloat16), mask=ok)
        if NT >= 2:
            gl.store(y_ptr + (tok + 8) * sym + row, v1.to(gl.bfloat16), mask=ok1)
        if NT == 4:
            gl.store(y_ptr + (tok + 16) * sym + row, v2.to(gl.bfloat16), mask=ok2)
            gl.store(y_ptr + (tok + 24) * sym + row, v3.to(gl.bfloat16), mask=ok3)
        if WR == 2:
            gl.store(y_ptr + tok * sym + row + 16, v2.to(gl.bfloat16), mask=ok2)
            if NT == 2:
                gl.store(y_ptr + (tok + 8) * sym + row + 16, v3.to(gl.bfloat16), mask=ok3)

    @gluon.jit
    def _store_parts(ws_ptr, sp, M, N, v, v1, v2, v3, row, tok, ok, ok1, ok2, ok3,
                     NT: gl.constexpr, WR: gl.constexpr = 1):
        """_store_out's values as fp32 partials into split sp of ws_ptr [splits, M, N]."""
        wp = ws_ptr + sp.to(gl.int64) * M * N
        gl.store(wp + tok * N + row, v, mask=ok)
        if NT >= 2:
            gl.store(wp + (tok + 8) * N + row, v1, mask=ok1)
        if NT == 4:
            gl.store(wp + (tok + 16) * N + row, v2, mask=ok2)
            gl.store(wp + (tok + 24) * N + row, v3, mask=ok3)
        if WR == 2:
            gl.store(wp + tok * N + row + 16, v2, mask=ok2)
            if NT == 2:
                gl.store(wp + (tok + 8) * N + row + 16, v3, mask=ok3)

    @gluon.jit
    def _item(it, full, splits, rps, n_rounds):
        """(block, K run, first round, end round) of item it: items [0, full) are whole blocks,
        the others the last blocks' K in ``splits`` runs of rps rounds (tail_plan)."""
        tail = (it >= full).to(gl.int32)
        t = gl.maximum(it - full, 0)
        sp = (t % splits) * tail
        r0 = sp * rps
        return (it * (1 - tail) + (full + t // splits) * tail, sp, r0,
                gl.minimum(r0 + rps + (1 - tail) * n_rounds, n_rounds))

    @gluon.jit
    def _round(hs, las, lbs, xs, ready, empty, i, xr, hbw, hbw2, acc01, acc23, bcc01, bcc23,
               ccc01, ccc23, dcc01, dcc23, zero, WK: gl.constexpr, NT: gl.constexpr,
               NS: gl.constexpr, P: gl.constexpr, Q: gl.constexpr, X: gl.constexpr,
               LP: gl.constexpr, LX: gl.constexpr, WR: gl.constexpr, XR: gl.constexpr = 0):
        """The consumers' round i: its stage's planes and x from the ring (then the stage back
        to the producer), the decode and the MMAs into the accumulators (acc, bcc: tokens 0-7,
        8-15; with NT 4 ccc, dcc: 16-23, 24-31, the same decoded words; with WR 2 ccc, dcc:
        the second 16-row block's tokens 0-7, 8-15 on the same x, its bases hbw2; with XR x from
        the resident x buffers 2 xr, 2 xr + 1: xr, the round within the item's K part)."""
        st = i % NS
        xi = st
        if XR:
            xi = xr
        mbarrier.wait(ready.index(st), (i // NS) & 1)
        h = _planes(hs.index(WR * st), LP, P)
        la = _planes(las.index(WR * st), LP, P)
        lb = _planes(lbs.index(WR * st), LP, P)
        if WR == 2:
            h2 = _planes(hs.index(WR * st + 1), LP, P)
            la2 = _planes(las.index(WR * st + 1), LP, P)
            lb2 = _planes(lbs.index(WR * st + 1), LP, P)
        xsa = xs.index(2 * xi)
        xsb = xs.index(2 * xi + 1)
        xa = _xtile(xsa.slice(0, 16 * WK), LX, X)
        xb = _xtile(xsb.slice(0, 16 * WK), LX, X)
        if NT >= 2:
            xa1 = _xtile(xsa.slice(16 * WK, 16 * WK), LX, X)
            xb1 = _xtile(xsb.slice(16 * WK, 16 * WK), LX, X)
        if NT == 4:
            xa2 = _xtile(xsa.slice(32 * WK, 16 * WK), LX, X)
            xb2 = _xtile(xsb.slice(32 * WK, 16 * WK), LX, X)
            xa3 = _xtile(xsa.slice(48 * WK, 16 * WK), LX, X)
            xb3 = _xtile(xsb.slice(48 * WK, 16 * WK), LX, X)
        # the stage back to the producer's TMA: the arrive orders these reads before it
        # (release), as a TMA pipeline's consumer release does; no proxy fence (without it
        # 0.2-2.3% faster at 16 rows on 16 of 18 configs / layers, session 46)
        mbarrier.arrive(empty.index(st), count=1)
        if NT == 1:   # (not read)
            xa1 = xa
            xb1 = xb
        alo, ahi, blo, bhi = _mm._decode(la, lb, h, hbw)
        acc01, acc23, bcc01, bcc23 = _mm._round_mmas(alo, ahi, blo, bhi, xa, xb, xa1, xb1, acc01,
                                                     acc23, bcc01, bcc23, zero, _S, Q, NT)
        if NT == 4:
            ccc01, ccc23, dcc01, dcc23 = _mm._round_mmas(alo, ahi, blo, bhi, xa2, xb2, xa3, xb3,
                                                         ccc01, ccc23, dcc01, dcc23, zero, _S, Q,
                                                         NT)
        if WR == 2:
            alo, ahi, blo, bhi = _mm._decode(la2, lb2, h2, hbw2)
            ccc01, ccc23, dcc01, dcc23 = _mm._round_mmas(alo, ahi, blo, bhi, xa, xb, xa1, xb1,
                                                         ccc01, ccc23, dcc01, dcc23, zero, _S, Q,
                                                         NT)
        return acc01, acc23, bcc01, bcc23, ccc01, ccc23, dcc01, dcc23

    @gluon.jit
    def _item_range(koff_ptr, it, n_items, N, G, full, splits, rps, n_rounds,
                    WR: gl.constexpr = 1, B: gl.constexpr = 0):
        """(block, [lo, hi)) of item it's escapes (it clamped to the last item): its block's
        entries (with WR 2 those of its 16-row block B), all K, in the block's first K run;
        none in the others."""
        tile, sp, r0, r1 = _item(gl.minimum(it, n_items - 1), full, splits, rps, n_rounds)
        lo, hi = _mm._esc_range(koff_ptr, tile * (16 * WR) + 16 * B, N, G, 1)
        return tile, lo, lo + (hi - lo) * (sp == 0).to(gl.int32)

    @gluon.jit
    def _consumer(hs, las, lbs, xs, ready, empty, y_ptr, ws_ptr, lock_ptr, x16_ptr, hb_ptr,
                  koff_ptr, kent_ptr, kval_ptr, M, N, sxm, sym, G, n_items, n_rounds, full,
                  splits, rps, WK: gl.constexpr, NT: gl.constexpr, NS: gl.constexpr,
                  P: gl.constexpr, Q: gl.constexpr,
                  X: gl.constexpr, LP: gl.constexpr, LX: gl.constexpr, QE: gl.constexpr,
                  EL: gl.constexpr, ESC: gl.constexpr, HB_PER_ROW: gl.constexpr,
                  PDL: gl.constexpr, red, RL: gl.constexpr, TAIL: gl.constexpr,
                  EW: gl.constexpr, corr, cfull, cfree, WR: gl.constexpr, XR: gl.constexpr = 0):
        """The WK consumer warps: per item, its rounds from the ring (decode + MMAs), the
        escapes' exact products (ESC; with EW those of the escape warp, from corr), the
        cross-warp sum (through red) and the bf16 stores."""
        gl.static_assert(not (ESC and (NT == 4 or WR == 2)),
                         "17-32 rows, 32-row blocks: escapes only through the escape warp")
        pid = gl.program_id(0)
        npg = gl.num_programs(0)
        SHAPE: gl.constexpr = [WK, 8, 2, 4, _S]
        ACC: gl.constexpr = gl.SliceLayout(4, Q)
        zero = gl.zeros(SHAPE, gl.float32, Q)
        prow = _mm._i5(8, 1, P) + 8 * _mm._i5(2, 2, P)               # [1, 8, 2, 1, 1]
        if not HB_PER_ROW:
            hbw = gl.load(hb_ptr).to(gl.int32) * 0x01010101 + gl.zeros(SHAPE, gl.int32, P)
            hbw2 = hbw
        _mm._gdc_wait(PDL > 0)
        if ESC:   # the first item's range and first chunk, and the second item's range
            t0, elo, ehi = _item_range(koff_ptr, pid, n_items, N, G, full, splits, rps, n_rounds)
            ek = _mm._esc_mma_entries(kent_ptr, kval_ptr, elo, ehi, 0, t0 * 16, WK, 1, EL)
            tn, nlo, nhi = _item_range(koff_ptr, pid + npg, n_items, N, G, full, splits, rps,
                                       n_rounds)
        i = 0
        jj = 0
        for it in range(pid, n_items, npg):
            tile, sp, r0, r1 = _item(it, full, splits, rps, n_rounds)
            n0 = tile * (16 * WR)
            if HB_PER_ROW:
                hbw = gl.load(hb_ptr + (n0 + prow) * 4, mask=n0 + prow < N, other=0) + gl.zeros(
                    SHAPE, gl.int32, P)
                if WR == 2:
                    hbw2 = gl.load(hb_ptr + (n0 + 16 + prow) * 4, mask=n0 + 16 + prow < N,
                                   other=0) + gl.zeros(SHAPE, gl.int32, P)
                else:
                    hbw2 = hbw
            if ESC:
                # this item's first chunk as MMA operands (its entries came during the last
                # item; the x gathers are in flight during the main loop), the next item's
                # entries and the one after's range (a block that waited for its own escapes at
                # its start or end took ~2.4 us more, session 44)
                ea = _mm._esc_operands(ek, x16_ptr, sxm, M, 1, NT, QE, EL, True)
                ek = _mm._esc_mma_entries(kent_ptr, kval_ptr, nlo, nhi, 0, tn * 16, WK, 1, EL)
                clo = elo
                chi = ehi
                elo = nlo
                ehi = nhi
                tn, nlo, nhi = _item_range(koff_ptr, it + 2 * npg, n_items, N, G, full, splits,
                                           rps, n_rounds)
            acc01 = gl.zeros([WK, 8, 2, 4], gl.float32, ACC)
            acc23 = gl.zeros([WK, 8, 2, 4], gl.float32, ACC)
            bcc01 = gl.zeros([WK, 8, 2, 4], gl.float32, ACC)
            bcc23 = gl.zeros([WK, 8, 2, 4], gl.float32, ACC)
            ccc01 = gl.zeros([WK, 8, 2, 4], gl.float32, ACC)   # (NT 4 only: tokens 16-31)
            ccc23 = gl.zeros([WK, 8, 2, 4], gl.float32, ACC)
            dcc01 = gl.zeros([WK, 8, 2, 4], gl.float32, ACC)
            dcc23 = gl.zeros([WK, 8, 2, 4], gl.float32, ACC)
            for r in range(r0, r1):
                acc01, acc23, bcc01, bcc23, ccc01, ccc23, dcc01, dcc23 = _round(
                    hs, las, lbs, xs, ready, empty, i, r - r0, hbw, hbw2, acc01, acc23, bcc01,
                    bcc23, ccc01, ccc23, dcc01, dcc23, zero, WK, NT, NS, P, Q, X, LP, LX, WR, XR)
                i += 1
            if ESC:   # the escapes' exact products: the first chunk, then any further ones,
                #       added before the cross-warp sum (no reduction of their own)
                e01 = gl.zeros([WK, 8, 2, 4, 1], gl.float32, QE)
                e23 = gl.zeros([WK, 8, 2, 4, 1], gl.float32, QE)
                f01 = gl.zeros([WK, 8, 2, 4, 1], gl.float32, QE)
                f23 = gl.zeros([WK, 8, 2, 4, 1], gl.float32, QE)
                e01, e23, f01, f23 = _mm._esc_apply(e01, e23, f01, f23, ea, NT, QE)
                for t in range(1, gl.cdiv(chi - clo, 16 * WK)):
                    ek2 = _mm._esc_mma_entries(kent_ptr, kval_ptr, clo, chi, t, n0, WK, 1, EL)
                    e01, e23, f01, f23 = _mm._esc_apply(
                        e01, e23, f01, f23,
                        _mm._esc_operands(ek2, x16_ptr, sxm, M, 1, NT, QE, EL, True), NT, QE)
                acc01 += gl.convert_layout(gl.sum(e01, axis=4), ACC)
                acc23 += gl.convert_layout(gl.sum(e23, axis=4), ACC)
                if NT == 2:
                    bcc01 += gl.convert_layout(gl.sum(f01, axis=4), ACC)
                    bcc23 += gl.convert_layout(gl.sum(f23, axis=4), ACC)
            row, tok = _out_index(RL)
            row += n0
            ok = (row < N) & (tok < M)
            v = _cross_sum(red, acc01, acc23, RL)
            if NT >= 2:
                v1 = _cross_sum(red, bcc01, bcc23, RL)
                ok1 = (row < N) & (tok + 8 < M)
            if NT == 1:   # (not stored)
                v1 = v
                ok1 = ok
            if NT == 4:
                v2 = _cross_sum(red, ccc01, ccc23, RL)
                v3 = _cross_sum(red, dcc01, dcc23, RL)
                ok2 = (row < N) & (tok + 16 < M)
                ok3 = (row < N) & (tok + 24 < M)
            elif WR == 2:   # the second 16-row block: rows + 16
                v2 = _cross_sum(red, ccc01, ccc23, RL)
                ok2 = (row + 16 < N) & (tok < M)
                if NT == 2:
                    v3 = _cross_sum(red, dcc01, dcc23, RL)
                    ok3 = (row + 16 < N) & (tok + 8 < M)
                else:   # (not stored)
                    v3 = v2
                    ok3 = ok2
            else:   # (not stored)
                v2 = v
                v3 = v
                ok2 = ok
                ok3 = ok
            if EW:   # the escape warp's products of this item, then its buffer back
                SL: gl.constexpr = gl.SliceLayout(0, RL)
                mbarrier.wait(cfull.index(0), jj & 1)
                v += corr.index(0).load(SL)
                if NT >= 2:
                    v1 += corr.index(1).load(SL)
                if NT == 4 or WR == 2:
                    v2 += corr.index(2).load(SL)
                if NT == 4 or (WR == 2 and NT == 2):
                    v3 += corr.index(3).load(SL)
                mbarrier.arrive(cfree.index(0), count=1)
                jj += 1
            if TAIL == 0:
                _store_out(y_ptr, sym, v, v1, v2, v3, row, tok, ok, ok1, ok2, ok3, NT, WR)
            elif TAIL == 2:   # x resident in parts: the partials only (sum_parts adds them)
                _store_parts(ws_ptr, sp, M, N, v, v1, v2, v3, row, tok, ok, ok1, ok2, ok3, NT,
                             WR)
            elif it < full:
                _store_out(y_ptr, sym, v, v1, v2, v3, row, tok, ok, ok1, ok2, ok3, NT, WR)
            else:   # split-K: the fp32 partials into ws_ptr [splits, M, N]; the block's last
                #     item to finish adds them in split order and stores y
                _store_parts(ws_ptr, sp, M, N, v, v1, v2, v3, row, tok, ok, ok1, ok2, ok3, NT,
                             WR)
                _mm._barrier()   # every thread's partial is written before the ticket
                ticket = gl.atomic_add(lock_ptr + tile, 1, sem="acq_rel", scope="gpu")
                if ticket == splits - 1:
                    v = gl.zeros_like(v)
                    v1 = gl.zeros_like(v)
                    v2 = gl.zeros_like(v)
                    v3 = gl.zeros_like(v)
                    for k in range(splits):
                        wp = ws_ptr + k * M * N
                        v += gl.load(wp + tok * N + row, mask=ok, other=0.0,
                                     cache_modifier=".cg")
                        if NT >= 2:
                            v1 += gl.load(wp + (tok + 8) * N + row, mask=ok1, other=0.0,
                                          cache_modifier=".cg")
                        if NT == 4:
                            v2 += gl.load(wp + (tok + 16) * N + row, mask=ok2, other=0.0,
                                          cache_modifier=".cg")
                            v3 += gl.load(wp + (tok + 24) * N + row, mask=ok3, other=0.0,
                                          cache_modifier=".cg")
                        if WR == 2:
                            v2 += gl.load(wp + tok * N + row + 16, mask=ok2, other=0.0,
                                          cache_modifier=".cg")
                            if NT == 2:
                                v3 += gl.load(wp + (tok + 8) * N + row + 16, mask=ok3,
                                              other=0.0, cache_modifier=".cg")
                    _store_out(y_ptr, sym, v, v1, v2, v3, row, tok, ok, ok1, ok2, ok3, NT, WR)
                    gl.atomic_xchg(lock_ptr + tile, 0)
        _mm._gdc_launch_dependents(PDL > 0)

    @gluon.jit
    def _esc_worker(x16_ptr, koff_ptr, kent_ptr, kval_ptr, corr, cfull, cfree, M, N, sxm, G,
                    n_items, n_rounds, full, splits, rps, NT: gl.constexpr, PDL: gl.constexpr,
                    QE1: gl.constexpr, EL1: gl.constexpr, WR: gl.constexpr):
        """The escape warp (ws_ewarp): per item, its block's escape products as m16n8k16 MMAs
        (16 entries a chunk, the next chunk's entries loaded before this one's MMAs), then,
        once the consumers have read the last item's, into corr ([corr_slots, 16, 2, 4] fp32:
        the cross-warp sum's [row, p, c]; with WR 2 the second 16-row block's in slots 2, 3)
        and cfull arrived."""
        pid = gl.program_id(0)
        npg = gl.num_programs(0)
        _mm._gdc_wait(PDL > 0)
        jj = 0
        for it in range(pid, n_items, npg):
            tile, lo, hi = _item_range(koff_ptr, it, n_items, N, G, full, splits, rps, n_rounds,
                                       WR, 0)
            n0 = tile * (16 * WR)
            e01 = gl.zeros([1, 8, 2, 4, 1], gl.float32, QE1)
            e23 = gl.zeros([1, 8, 2, 4, 1], gl.float32, QE1)
            f01 = gl.zeros([1, 8, 2, 4, 1], gl.float32, QE1)
            f23 = gl.zeros([1, 8, 2, 4, 1], gl.float32, QE1)
            g01 = gl.zeros([1, 8, 2, 4, 1], gl.float32, QE1)   # (NT 4 only: tokens 16-31)
            g23 = gl.zeros([1, 8, 2, 4, 1], gl.float32, QE1)
            h01 = gl.zeros([1, 8, 2, 4, 1], gl.float32, QE1)
            h23 = gl.zeros([1, 8, 2, 4, 1], gl.float32, QE1)
            ek = _mm._esc_mma_entries(kent_ptr, kval_ptr, lo, hi, 0, n0, 1, 1, EL1)
            for t in range(gl.cdiv(hi - lo, 16)):
                ea = _mm._esc_operands(ek, x16_ptr, sxm, M, 1, NT, QE1, EL1, True)
                if NT == 4:   # x rows 16-31 (row stride 2 sxm bf16)
                    eb = _mm._esc_operands(ek, x16_ptr + 32 * sxm, sxm, M - 16, 1, NT, QE1, EL1,
                                           True)
                ek = _mm._esc_mma_entries(kent_ptr, kval_ptr, lo, hi, t + 1, n0, 1, 1, EL1)
                e01, e23, f01, f23 = _mm._esc_apply(e01, e23, f01, f23, ea, NT, QE1)
                if NT == 4:
                    g01, g23, h01, h23 = _mm._esc_apply(g01, g23, h01, h23, eb, NT, QE1)
            if WR == 2:   # the second 16-row block's, into g / h (tokens 0-7 / 8-15)
                tile, lo, hi = _item_range(koff_ptr, it, n_items, N, G, full, splits, rps,
                                           n_rounds, WR, 1)
                ek = _mm._esc_mma_entries(kent_ptr, kval_ptr, lo, hi, 0, n0 + 16, 1, 1, EL1)
                for t in range(gl.cdiv(hi - lo, 16)):
                    ea = _mm._esc_operands(ek, x16_ptr, sxm, M, 1, NT, QE1, EL1, True)
                    ek = _mm._esc_mma_entries(kent_ptr, kval_ptr, lo, hi, t + 1, n0 + 16, 1, 1,
                                              EL1)
                    g01, g23, h01, h23 = _mm._esc_apply(g01, g23, h01, h23, ea, NT, QE1)
            mbarrier.wait(cfree.index(0), (jj & 1) ^ 1)
            corr.index(0).store(gl.reshape(_rows16(gl.sum(e01, axis=4), gl.sum(e23, axis=4)),
                                           [16, 2, 4]))
            if NT >= 2:
                corr.index(1).store(gl.reshape(_rows16(gl.sum(f01, axis=4),
                                                       gl.sum(f23, axis=4)), [16, 2, 4]))
            if NT == 4 or WR == 2:
                corr.index(2).store(gl.reshape(_rows16(gl.sum(g01, axis=4),
                                                       gl.sum(g23, axis=4)), [16, 2, 4]))
            if NT == 4 or (WR == 2 and NT == 2):
                corr.index(3).store(gl.reshape(_rows16(gl.sum(h01, axis=4),
                                                       gl.sum(h23, axis=4)), [16, 2, 4]))
            mbarrier.arrive(cfull.index(0), count=1)
            jj += 1

    @gluon.jit
    def _ws_kernel(h_desc, la_desc, lb_desc, xa_desc, xb_desc, y_ptr, ws_ptr, lock_ptr, x16_ptr,
                   hb_ptr, koff_ptr, kent_ptr, kval_ptr, M, N, sxm, sym, G, n_items, n_rounds,
                   full, splits, rps,
                   WK: gl.constexpr, NT: gl.constexpr, NS: gl.constexpr, P: gl.constexpr,
                   Q: gl.constexpr, X: gl.constexpr, LP: gl.constexpr, LX: gl.constexpr,
                   QE: gl.constexpr, EL: gl.constexpr, ESC: gl.constexpr,
                   HB_PER_ROW: gl.constexpr, RL: gl.constexpr, TAIL: gl.constexpr = 0,
                   BOX3: gl.constexpr = False, SW: gl.constexpr = None, PDL: gl.constexpr = 0,
                   EW: gl.constexpr = False,
                   QE1: gl.constexpr = None, EL1: gl.constexpr = None, WR: gl.constexpr = 1,
                   XR: gl.constexpr = 0):
        # x16_ptr: x [M, K] bf16 (row stride 2 sxm), for the escapes' gathers; y_ptr bf16 [M, N]
        # (row stride sym); hb_ptr: the per-tensor base (u8) or the per-row bases as int32 words
        # (kernel_hb's [N, 16] bytes); koff / kent / kval: the 16-row escape index (W12Planes).
        # Items (_item): blocks [0, full) whole, the others split over K (tail_plan); with TAIL
        # 1 (splits > 1) ws_ptr fp32 [splits, M, N] partials and lock_ptr a zeroed ticket per
        # block (left zero), TAIL 2 (x resident in parts) the partials only (lock_ptr not
        # read; sum_parts adds them), else neither read (y twice). WR 2: items of two 16-row blocks
        # (32-row blocks; their plane buffers WR st, WR st + 1). XR > 0: x resident, XR rounds
        # of the program's K part (BOX3; xres_plan), x buffers 2 r, 2 r + 1 for its round r
        hs = gl.allocate_shared_memory(gl.int32, [WR * NS, 16 * WK, _TW], SW)
        las = gl.allocate_shared_memory(gl.int32, [WR * NS, 16 * WK, _TW], SW)
        lbs = gl.allocate_shared_memory(gl.int32, [WR * NS, 16 * WK, _TW], SW)
        if XR:
            xs = gl.allocate_shared_memory(gl.int32, [2 * XR, 16 * WK * NT, _TW], SW)
        else:
            xs = gl.allocate_shared_memory(gl.int32, [2 * NS, 16 * WK * NT, _TW], SW)
        red = gl.allocate_shared_memory(gl.float32, [WK, 16, 2, 4],
                                        gl.SwizzledSharedLayout(1, 1, 1, [3, 2, 1, 0]))
        ready = gl.allocate_shared_memory(gl.int64, [NS, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [NS, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(NS):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=1)
        if EW:   # the escape warp's products through corr (cfull: written, cfree: read)
            CN: gl.constexpr = 4 if WR == 2 else NT   # (corr_slots)
            corr = gl.allocate_shared_memory(gl.float32, [CN, 16, 2, 4],
                                             gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0]))
            cfull = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
            cfree = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
            mbarrier.init(cfull.index(0), count=1)
            mbarrier.init(cfree.index(0), count=1)
            gl.warp_specialize([
                (_consumer, (hs, las, lbs, xs, ready, empty, y_ptr, ws_ptr, lock_ptr, x16_ptr,
                             hb_ptr, koff_ptr, kent_ptr, kval_ptr, M, N, sxm, sym, G, n_items,
                             n_rounds, full, splits, rps, WK, NT, NS, P, Q, X, LP, LX, QE, EL,
                             False, HB_PER_ROW, PDL, red, RL, TAIL, True, corr, cfull, cfree,
                             WR, XR)),
                (_producer, (h_desc, la_desc, lb_desc, xa_desc, xb_desc, hs, las, lbs, xs,
                             ready, empty, n_items, n_rounds, full, splits, rps, WK, NT, NS, PDL,
                             BOX3, WR, XR)),
                (_esc_worker, (x16_ptr, koff_ptr, kent_ptr, kval_ptr, corr, cfull, cfree, M, N,
                               sxm, G, n_items, n_rounds, full, splits, rps, NT, PDL, QE1,
                               EL1, WR)),
            ], [1, 1], [40, 96])
        else:
            gl.warp_specialize([
                (_consumer, (hs, las, lbs, xs, ready, empty, y_ptr, ws_ptr, lock_ptr, x16_ptr,
                             hb_ptr, koff_ptr, kent_ptr, kval_ptr, M, N, sxm, sym, G, n_items,
                             n_rounds, full, splits, rps, WK, NT, NS, P, Q, X, LP, LX, QE, EL,
                             ESC, HB_PER_ROW, PDL, red, RL, TAIL, False, red, ready, empty,
                             WR, XR)),
                (_producer, (h_desc, la_desc, lb_desc, xa_desc, xb_desc, hs, las, lbs, xs,
                             ready, empty, n_items, n_rounds, full, splits, rps, WK, NT, NS, PDL,
                             BOX3, WR, XR)),
            ], [1], [40])


if _k.HAS_TRITON:
    import triton
    import triton.language as tl

    @triton.jit
    def _sum_parts_kernel(ws_ptr, y_ptr, M, N, sym, PARTS: tl.constexpr, BLOCK: tl.constexpr,
                          PDL: tl.constexpr = 0):
        """y [M, N] (bf16, row stride sym) = the sum of ws [PARTS, M, N] (fp32) in part order:
        the partials of x resident in parts of K (TAIL 2)."""
        _pdl.start(PDL)
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = offs < M * N
        acc = tl.load(ws_ptr + offs, mask=ok, other=0.0)
        for p in tl.static_range(1, PARTS):
            acc += tl.load(ws_ptr + p * M * N + offs, mask=ok, other=0.0)
        tl.store(y_ptr + (offs // N) * sym + offs % N, acc.to(tl.bfloat16), mask=ok)


SUM_BLOCK = 1024   # outputs per program of _sum_parts_kernel


def sum_parts(ws: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """y[:] = ws.sum(0) in part order (fp32, then bf16): ``_sum_parts_kernel`` (GPU, PDL where
    active; or the Triton interpreter on CPU tensors)."""
    parts, M, N = ws.shape
    if y.shape != (M, N) or y.stride(1) != 1 or not ws.is_contiguous():
        raise ValueError(f"sum_parts: ws {tuple(ws.shape)} contiguous, y [M, N] rows dense; got "
                         f"y {tuple(y.shape)}")
    _k._check_device(ws, y)
    _sum_parts_kernel[(_cdiv(M * N, SUM_BLOCK),)](ws, y, M, N, y.stride(0), PARTS=parts,
                                                  BLOCK=SUM_BLOCK, num_warps=4,
                                                  **_pdl.launch_args(y))
    return y


def swizzle(rank: int = 2):
    """The shared layout of every ring buffer and TMA box: 128-byte swizzle, int32 (rank 3: the
    boxes of the 3-D descriptors, the same bytes)."""
    return gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=rank)


def box3_ok(K: int, Kp: int) -> bool:
    """Whether the 3-D descriptors (one box per plane / x half a round) can run a K-column
    weight padded to Kp: whole 32-word chunks in every plane half and x half (Kp % 256 == 0;
    x unpadded, K == Kp), so that TMA's zero fill is never needed inside a chunk."""
    return K == Kp and Kp % 256 == 0


def _chunks(t32: torch.Tensor, start: int, width: int) -> torch.Tensor:
    """Columns [start, start + width) of an int32 [rows, cols] view as [width / 32, rows, 32]
    (32-word chunks outermost; a strided view of the same memory)."""
    return t32.as_strided((width // TILE_W, t32.shape[0], TILE_W), (TILE_W, t32.stride(0), 1),
                          t32.storage_offset() + start)


@functools.lru_cache(maxsize=None)
def layouts() -> tuple:
    """(P, Q, X, LP, LX, QE, EL): mma.py's register layouts for WK warps, WR 1, S 8, the two
    shared-memory read layouts of _planes and _xtile, and the escape MMAs' layouts."""
    cfg = _mm.MmaConfig(warps_k=WK, warps_r=1, ahead=0, words=S)
    P, Q, X, _ = _mm.layouts(cfg)
    QE, EL = _mm.esc_mma_layouts(cfg)
    wb = [[16 << i, 0] for i in range(WK.bit_length() - 1)]
    # plane buffer [16 WK, 32]: regs s (cols 1, 2, 4) and the slot pair (row 8); lanes c (cols
    # 8, 16), g (rows 1, 2, 4); warps rows 16, 32
    LP = gl.DistributedLinearLayout(reg_bases=[[0, 1], [0, 2], [0, 4], [8, 0]],
                                    lane_bases=[[0, 8], [0, 16], [1, 0], [2, 0], [4, 0]],
                                    warp_bases=wb, block_bases=[], shape=[16 * WK, TILE_W])
    # x buffer [16 WK, 32]: regs the 16 words (cols 1-8); lanes c0 (col 16), b (row 8), t (rows
    # 1, 2, 4); warps rows 16, 32
    LX = gl.DistributedLinearLayout(reg_bases=[[0, 1], [0, 2], [0, 4], [0, 8]],
                                    lane_bases=[[0, 16], [8, 0], [1, 0], [2, 0], [4, 0]],
                                    warp_bases=wb, block_bases=[], shape=[16 * WK, TILE_W])
    return P, Q, X, LP, LX, QE, EL


@functools.lru_cache(maxsize=None)
def esc_warp_layouts() -> tuple:
    """(QE1, EL1): the escape MMAs' layouts for the one escape warp (ws_ewarp)."""
    return _mm.esc_mma_layouts(_mm.MmaConfig(warps_k=1, warps_r=1, ahead=0, words=S))


@functools.lru_cache(maxsize=None)
def sum_layout():
    """_sum_store's read of [WK, 16 (row), 2, 4] partial sums: a thread holds the WK partials
    of one output (lanes: 8 rows, then 4 token pairs; warps: the two 8-row halves and p)."""
    return gl.BlockedLayout(size_per_thread=[WK, 1, 1, 1], threads_per_warp=[1, 8, 1, 4],
                            warps_per_cta=[1, 2, 2, 1], order=[1, 3, 2, 0])


def w12_ws(x: torch.Tensor, planes: W12Planes, cfg: WsConfig | None = None) -> torch.Tensor:
    """``x @ W^T`` (bf16 [M, N], fp32 accumulation) for bf16 x [M, K], 1 <= M <= MAX_M, on an
    sm_90 GPU. ``cfg``: default ``CANDIDATES[0]`` (17-32 rows: ``CANDIDATES32[0]``); at 17-32
    rows a weight with escapes needs ``ws_ewarp``."""
    M, K = x.shape
    if K != planes.K or not supported(M, K, x.device):
        raise ValueError(f"w12_ws: needs an sm_90 GPU with Gluon, 1 <= M <= {MAX_M}, K % 32 == 0 "
                         f"and K == the weight's ({planes.K}); got x {tuple(x.shape)} on "
                         f"{x.device}")
    if planes.idx_rows != IDX_ROWS:
        raise ValueError(f"w12_ws reads the {IDX_ROWS}-row escape index")
    NT = nt_for(M)
    cfg = cfg or (CANDIDATES32 if NT == 4 else CANDIDATES)[0]
    x = x.contiguous()
    if x.data_ptr() % 16:   # a TMA base must be 16-byte aligned (a view into a larger buffer)
        x = x.clone()
    N, Kp = planes.N, planes.Kp
    HW = Kp // 8
    box3 = box3_ok(K, Kp)
    if cfg.ws_xres and not box3:
        raise ValueError(f"w12_ws: {cfg.short} (x resident) needs K % 256 == 0; got K = {K}")
    if not fits(cfg, NT, K):
        raise ValueError(f"w12_ws: {cfg.short} at {M} rows needs more shared memory than an SM "
                         f"has" + (" (32-row blocks: at most 16 rows)" if cfg.ws_rows == 2
                                   else f" (x resident: K = {K})" if cfg.ws_xres else ""))
    esc = planes.kent.numel() > 0
    if needs_ewarp(cfg, NT, esc):
        raise ValueError(f"w12_ws: {cfg.short} at {M} rows: a weight with escapes needs the "
                         f"escape warp (ws_ewarp) above 16 rows and with 32-row blocks")
    y = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)
    sw = swizzle()
    # each half its own descriptor over a strided view: a last partial round reads zeros past
    # the half's end (and x's second half past K, where K < Kp), not the next half
    L32, H32, x32 = planes.L.view(torch.int32), planes.H.view(torch.int32), x.view(torch.int32)
    if box3:   # [chunks of 32 words, rows, 32]: a round's WK (2 WK for x) chunks in one box
        sw3 = swizzle(3)
        descs = (TensorDescriptor.from_tensor(_chunks(H32, 0, HW), [WK, 16, TILE_W], sw3),
                 TensorDescriptor.from_tensor(_chunks(L32, 0, HW), [WK, 16, TILE_W], sw3),
                 TensorDescriptor.from_tensor(_chunks(L32, HW, HW), [WK, 16, TILE_W], sw3),
                 TensorDescriptor.from_tensor(_chunks(x32, 0, 2 * HW), [2 * WK, 8, TILE_W], sw3),
                 TensorDescriptor.from_tensor(_chunks(x32, 2 * HW, 2 * HW), [2 * WK, 8, TILE_W],
                                              sw3))
    else:
        descs = (TensorDescriptor.from_tensor(H32, [16, TILE_W], sw),
                 TensorDescriptor.from_tensor(L32[:, :HW], [16, TILE_W], sw),
                 TensorDescriptor.from_tensor(L32[:, HW:], [16, TILE_W], sw),
                 TensorDescriptor.from_tensor(x32[:, :2 * HW], [8, TILE_W], sw),
                 TensorDescriptor.from_tensor(x32[:, 2 * HW:], [8, TILE_W], sw))
    n_tiles = _cdiv(N, 16 * cfg.ws_rows)
    n_sm = _k._num_sms(x.device)
    if cfg.ws_xres:
        full, splits, rps, progs = xres_plan(cfg, N, Kp, n_sm)
    else:
        full, splits, rps = tail_plan(cfg, N, Kp, n_sm)
        progs = cfg.ws_grid * n_sm
    n_items = full + (n_tiles - full) * splits
    parts = cfg.ws_xres and splits > 1   # every block split, no tickets: sum_parts adds them
    if parts:
        wsb = torch.empty((splits, M, N), dtype=torch.float32, device=x.device)
        locks = y
    else:
        wsb, locks = _k.split_buffers(y, splits, n_tiles)
    P, Q, X, LP, LX, QE, EL = layouts()
    QE1, EL1 = esc_warp_layouts()
    hb = planes.hb.view(torch.int32) if planes.per_row else planes.hb
    _ws_kernel[(min(n_items, progs),)](
        *descs, y, wsb, locks, x, hb, planes.koff, planes.kent, planes.kval, M, N,
        x.stride(0) // 2, y.stride(0), _cdiv(Kp // 2, GROUP), n_items,
        n_rounds(Kp), full, splits, rps,
        WK=WK, NT=NT, NS=cfg.ws_stages, P=P, Q=Q, X=X, LP=LP, LX=LX, QE=QE, EL=EL,
        ESC=esc,
        HB_PER_ROW=planes.per_row, RL=sum_layout(), TAIL=2 if parts else int(splits > 1),
        BOX3=box3, SW=sw,
        EW=esc and cfg.ws_ewarp > 0, QE1=QE1, EL1=EL1, WR=cfg.ws_rows,
        XR=rps if cfg.ws_xres else 0,
        **(_pdl.launch_args(x, 2) if WS_PDL else {}), num_warps=WK,
        **({"maxnreg": cfg.ws_maxnreg} if cfg.ws_maxnreg else {}))
    if parts:
        sum_parts(wsb, y)
    return y
