"""Does the W12 planes' access pattern itself cap the DRAM bandwidth? A read-only probe.

The W12 tensor-core loop reached 80% of the H200's DRAM peak where the same loop on bf16 words
reached 89% (Nsight Compute, docs/benchmarks/w12.md, session 35). Per round a program of 16
rows reads three runs per row (the H plane, the L plane's two halves) where the bf16 loop reads
two. This probe reads the same bytes in the same rounds with one trivial kernel (loads, an
integer sum, no decode, no MMA), for several weight layouts, and prints TB/s:

* ``planes``: H [N, K/2] and L [N, K] bytes as stored today (three runs per row and round, H
  from another array);
* ``rows``: each row's L then H in one buffer row (three runs per row, one array);
* ``row-tiles``: per row, each round's L-half-a, L-half-b and H runs stored together (one
  run per row and round);
* ``block-tiles``: per 16-row block and round, all its bytes stored together (one 12 KB run);
* ``bf16``: a bf16 weight [N, K] read as the bf16 loop does (two runs per row, 2x the bytes).

    PYTHONPATH=. python3 scripts/gpu_w12_pattern_probe.py [--n 34816 --k 5120]

``--gluon CONFIGS`` (MmaConfig fields joined by "/", comma-separated; GPU only; N a multiple of
16 warps_r) times, on planes of the same shape (random bytes in the W12 layout), a Gluon kernel that issues exactly the
W12 tensor-core kernel's plane loads for each config (the same layouts, rounds, register ring
and ``mma._load_planes``) and only sums the words: no x loads, decode, MMA or escapes. Against
the kernel's own time this says what its loads alone cost in that program and round shape.
``--levels 0,1,2,3 --m 2,8`` builds the loop up: 1 adds the kernel's x loads (M activation
rows), 2 the decode, 3 the MMAs; at 3 the kernel itself runs on the same planes without
escapes.

Each layout is timed as the benches time (a CUDA graph of calls rotating over >= 512 MB of
copies, median of 5 replays), at num_stages 1 and 3 (Triton's software pipeline).
On CPU (TRITON_INTERPRET=1) ``--check`` compares each layout's sum with torch's on a small shape.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from specpilot.w12 import mma as MM  # noqa: E402

ROWS = 16
WORDS = 64   # H words per row and round of the tuned k2r1a2s8 config (4 S WK)


@triton.jit
def _probe(a_ptr, b_ptr, c_ptr, out_ptr, N, n_rounds, sa, sb, sc, ba, bb, bc, ra, rb, rc,
           W: tl.constexpr, NS: tl.constexpr, ROWS_: tl.constexpr):
    """Program pid reads, per round r < n_rounds and row i < ROWS_, W int32 words of each of NS
    streams at base + pid * b + i * s + r * rr (+ column), and stores the sum of all."""
    pid = tl.program_id(0)
    i = tl.arange(0, ROWS_)[:, None]
    col = tl.arange(0, W)[None, :]
    ok = pid * ROWS_ + i < N
    acc = tl.zeros([ROWS_, W], tl.int32)
    pa = a_ptr + pid.to(tl.int64) * ba + i * sa + col
    pb = b_ptr + pid.to(tl.int64) * bb + i * sb + col
    pc = c_ptr + pid.to(tl.int64) * bc + i * sc + col
    for r in range(n_rounds):
        acc += tl.load(pa + r * ra, mask=ok, other=0)
        if NS >= 2:
            acc += tl.load(pb + r * rb, mask=ok, other=0)
        if NS >= 3:
            acc += tl.load(pc + r * rc, mask=ok, other=0)
    tl.store(out_ptr + pid, tl.sum(tl.sum(acc, axis=1), axis=0))


if MM.HAS_GLUON:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def _gluon_probe(l_ptr, h_ptr, x_ptr, out_ptr, N, HW, M, sxm, WK: gl.constexpr,
                     WR: gl.constexpr, S: gl.constexpr, AHEAD: gl.constexpr, LEVEL: gl.constexpr,
                     NT: gl.constexpr, P: gl.constexpr, Q: gl.constexpr, X: gl.constexpr):
        """The read-only twin of mma._w12_mma_kernel's plane loads (its layouts, rounds, register
        ring and _load_planes), summing the words. LEVEL 1 adds the kernel's x loads
        (mma._load_x, M rows), 2 the decode of the words, 3 the MMAs on them (the kernel's loop
        without escapes, epilogue or split-K); from 1 on the stored sum is not checked."""
        pid = gl.program_id(0)
        n0 = pid * (16 * WR)
        gg = MM._i5(8 * WR, 1, P)
        row = n0 + 16 * (gg // 8) + 2 * (gg % 8) + MM._i5(2, 2, P)
        row_ok = row < N
        hrow = h_ptr + row.to(gl.int64) * HW
        lrow = l_ptr + row.to(gl.int64) * (2 * HW)
        q0 = (4 * S) * MM._i5(WK, 0, P) + S * MM._i5(4, 3, P) + MM._i5(S, 4, P)
        step = 4 * S * WK
        xq0 = 2 * ((4 * S) * MM._i4(WK, 0, X) + S * MM._i4(4, 2, X)) + MM._i4(2 * S, 3, X)
        tok0 = MM._i4(8 * WR, 1, X) % 8
        xrow0 = x_ptr + tok0 * sxm
        xrow1 = x_ptr + (tok0 + 8) * sxm
        SHAPE: gl.constexpr = [WK, 8 * WR, 2, 4, S]
        acc = gl.zeros(SHAPE, gl.int32, P)
        xacc = gl.zeros([WK, 8 * WR, 4, 2 * S], gl.int32, X)
        hbw = gl.full(SHAPE, 0x70707070, gl.int32, P)
        zero = gl.zeros(SHAPE, gl.float32, Q)
        facc = gl.zeros([WK, 8 * WR, 2, 4], gl.float32, gl.SliceLayout(4, Q))
        if AHEAD >= 1:
            h, la, lb = MM._load_planes(hrow, lrow, row_ok, q0, HW, HW)
        if AHEAD >= 2 and LEVEL >= 1:
            xa, xb, xa1, xb1 = MM._load_x(xrow0, xrow1, tok0 < M, tok0 + 8 < M, xq0, HW,
                                          4 * HW, HW, NT)
        for i in range(gl.cdiv(HW, step)):
            if AHEAD >= 1:
                h2, la2, lb2 = MM._load_planes(hrow, lrow, row_ok, (i + 1) * step + q0, HW, HW)
            else:
                h, la, lb = MM._load_planes(hrow, lrow, row_ok, i * step + q0, HW, HW)
            if LEVEL >= 1:
                if AHEAD >= 2:
                    xa2, xb2, xc2, xd2 = MM._load_x(xrow0, xrow1, tok0 < M, tok0 + 8 < M,
                                                    2 * (i + 1) * step + xq0, HW, 4 * HW, HW,
                                                    NT)
                else:
                    xa, xb, xa1, xb1 = MM._load_x(xrow0, xrow1, tok0 < M, tok0 + 8 < M,
                                                  2 * i * step + xq0, HW, 4 * HW, HW, NT)
            if LEVEL >= 2:
                alo, ahi, blo, bhi = gl.inline_asm_elementwise(
                    MM._DECODE, "=r,=r,=r,=r,r,r,r,r", [la, lb, h, hbw],
                    dtype=(gl.int32, gl.int32, gl.int32, gl.int32), is_pure=True, pack=1)
            if LEVEL >= 3:
                alo = gl.convert_layout(alo, Q)
                ahi = gl.convert_layout(ahi, Q)
                blo = gl.convert_layout(blo, Q)
                bhi = gl.convert_layout(bhi, Q)
                d01, d23 = MM._mma(alo, ahi, MM._x_operand(xa, S, Q), zero, zero)
                d01, d23 = MM._mma(blo, bhi, MM._x_operand(xb, S, Q), d01, d23)
                facc += gl.sum(d01 + d23, axis=4)
                if NT == 2:
                    d01, d23 = MM._mma(alo, ahi, MM._x_operand(xa1, S, Q), zero, zero)
                    d01, d23 = MM._mma(blo, bhi, MM._x_operand(xb1, S, Q), d01, d23)
                    facc += gl.sum(d01 + d23, axis=4)
            elif LEVEL == 2:
                acc += alo ^ ahi ^ blo ^ bhi
            else:
                acc += h + la + lb
            if LEVEL == 1 or LEVEL == 2:
                xacc += xa ^ xb
                if NT == 2:
                    xacc += xa1 ^ xb1
            if AHEAD >= 1:
                h, la, lb = h2, la2, lb2
            if AHEAD >= 2 and LEVEL >= 1:
                xa, xb, xa1, xb1 = xa2, xb2, xc2, xd2
        t = gl.sum(gl.sum(gl.sum(gl.sum(gl.sum(acc, axis=4), axis=3), axis=2), axis=1), axis=0)
        t += gl.sum(gl.sum(gl.sum(gl.sum(xacc, axis=3), axis=2), axis=1), axis=0)
        ft = gl.sum(gl.sum(gl.sum(gl.sum(facc, axis=3), axis=2), axis=1), axis=0)
        gl.store(out_ptr + pid, t + ft.to(gl.int32))


def gluon_probe(N: int, K: int, configs: list, levels: list, ms: list) -> None:
    """Time the read-only twin of the W12-MMA kernel's loads per config on N x K planes, at
    each of ``levels`` (0: loads; 1: + x loads; 2: + decode; 3: + MMA) and, from level 1 on, each
    M of ``ms``; at level 3 also the kernel itself (``mma.w12_mma``) on the same planes with no
    escapes."""
    from specpilot.w12 import kernel as Kn

    g = torch.Generator(device="cpu").manual_seed(1)
    L = torch.randint(0, 256, (N, K), generator=g, dtype=torch.uint8).cuda()
    H = torch.randint(0, 256, (N, K // 2), generator=g, dtype=torch.uint8).cuda()
    nbytes = L.numel() + H.numel()
    ring = [(L, H)] + [(L.clone(), H.clone())
                       for _ in range(max(1, -(-512 * 2**20 // nbytes) - 1))]
    G = Kn._cdiv(K // 2, Kn.GROUP)
    koff = torch.zeros(Kn._cdiv(N, Kn.IDX_ROWS) * G + 1, dtype=torch.int32, device="cuda")
    hb = torch.full((1,), 0x70, dtype=torch.uint8, device="cuda")
    planes = [Kn.W12Planes(N, K, li, hi, hb, koff, koff[:0], koff[:0].to(torch.int16))
              for li, hi in ring]
    for text in configs:
        cfg = MM.MmaConfig(*(int(v) for v in text.split("/")))
        P, Q, X, _ = MM.layouts(cfg)
        rows = 16 * cfg.warps_r
        if N % rows:   # a partial block would load its missing rows as H code 7, not summed zeros
            raise SystemExit(f"--gluon {cfg.short}: N = {N} is not a multiple of {rows}")
        blocks = N // rows
        out = torch.zeros(blocks, dtype=torch.int32, device="cuda")
        for level in levels:
            for M in (ms if level else [1]):
                x = torch.randn(M, K, device="cuda").to(torch.bfloat16)
                handle = []

                def run(i, cfg=cfg, level=level, x=x, M=M, handle=handle):
                    li, hi = ring[i]
                    handle[:] = [_gluon_probe[(blocks,)](
                        li.view(torch.int32), hi.view(torch.int32), x.view(torch.int32), out, N,
                        K // 8, M, K // 2, WK=cfg.warps_k, WR=cfg.warps_r, S=cfg.words,
                        AHEAD=cfg.ahead, LEVEL=level, NT=1 if M <= 8 else 2, P=P, Q=Q, X=X,
                        num_warps=cfg.warps_k * cfg.warps_r,
                        **({"maxnreg": cfg.maxnreg} if cfg.maxnreg else {}))]
                run(0)
                check = ""
                if level == 0:   # each program's sum against torch's (mod 2^32)
                    words = torch.cat([L.view(torch.int32), H.view(torch.int32)], 1)
                    want = words.to(torch.int64).sum(1).view(blocks, rows).sum(1)
                    ok = torch.equal((want & 0xFFFFFFFF).cpu(),
                                     out.to(torch.int64).cpu() & 0xFFFFFFFF)
                    check = f"sums {'PASS' if ok else 'FAIL'}"
                us = Kn.time_calls_us(run, len(ring))
                regs = getattr(handle[0], "n_regs", "?")
                print(f"gluon L{level} {cfg.short:14s} M={M:<2d} {us:7.1f} us "
                      f"{nbytes / us / 1e6:5.2f} TB/s regs {regs}  {check}", flush=True)
                if level == 3:
                    MM.w12_mma(x, planes[0], cfg)
                    us = Kn.time_calls_us(lambda i, x=x, cfg=cfg: MM.w12_mma(x, planes[i], cfg),
                                          len(ring))
                    print(f"kernel   {cfg.short:14s} M={M:<2d} {us:7.1f} us "
                          f"{nbytes / us / 1e6:5.2f} TB/s  (no escapes)", flush=True)


def layouts(N: int, K: int, device, WORDS: int = WORDS) -> dict:
    """{name: (buffers, launch args)}: random int32 words in each layout's buffers; args = the
    kernel's stream arguments (bases as tensors, strides in words)."""
    assert N % ROWS == 0 and K % (8 * WORDS) == 0
    hw, lw = K // 8, K // 4            # H and L words per row
    rounds = hw // WORDS
    g = torch.Generator(device="cpu").manual_seed(0)

    def rnd(*shape):
        return torch.randint(-2**31, 2**31 - 1, shape, generator=g, dtype=torch.int32).to(device)

    H, L = rnd(N, hw), rnd(N, lw)
    rowbuf = rnd(N, lw + hw)
    tiles = rnd(N, 3 * hw)
    blocks = rnd(N // ROWS * rounds * ROWS * 3 * WORDS)
    W16 = rnd(N, 2 * lw)
    rw = 3 * WORDS
    return {
        # (a, b, c, sa, sb, sc, ba, bb, bc, ra, rb, rc, W, NS, rounds)
        "planes": (H, L, L[:, hw:], hw, lw, lw, ROWS * hw, ROWS * lw, ROWS * lw,
                   WORDS, WORDS, WORDS, WORDS, 3, rounds),
        "rows": (rowbuf[:, lw:], rowbuf, rowbuf[:, hw:], lw + hw, lw + hw, lw + hw,
                 ROWS * (lw + hw), ROWS * (lw + hw), ROWS * (lw + hw), WORDS, WORDS, WORDS,
                 WORDS, 3, rounds),
        # the tiled layouts' one run per row (or block) and round, read as three loads of W
        "row-tiles": (tiles, tiles[:, WORDS:], tiles[:, 2 * WORDS:], 3 * hw, 3 * hw, 3 * hw,
                      ROWS * 3 * hw, ROWS * 3 * hw, ROWS * 3 * hw, rw, rw, rw, WORDS, 3, rounds),
        "block-tiles": (blocks, blocks[WORDS:], blocks[2 * WORDS:], rw, rw, rw,
                        rounds * ROWS * rw, rounds * ROWS * rw, rounds * ROWS * rw, ROWS * rw,
                        ROWS * rw, ROWS * rw, WORDS, 3, rounds),
        "bf16": (W16, W16[:, lw:], W16, 2 * lw, 2 * lw, 0, ROWS * 2 * lw, ROWS * 2 * lw, 0,
                 2 * WORDS, 2 * WORDS, 0, 2 * WORDS, 2, rounds),
    }


def run(N, spec, out, stages: int):
    a, b, c, sa, sb, sc, ba, bb, bc, ra, rb, rc, W, NS, rounds = spec
    _probe[(N // ROWS,)](a, b, c, out, N, rounds, sa, sb, sc, ba, bb, bc, ra, rb, rc, W=W, NS=NS,
                         ROWS_=ROWS, num_warps=2, num_stages=stages)
    return out


def expected(spec) -> int:
    """Sum of every word of the layout's buffers (its streams cover each word once)."""
    bufs = {t.untyped_storage().data_ptr(): t for t in spec[:spec[13]]}
    return sum(int(torch.empty(0, dtype=torch.int32).set_(t.untyped_storage()).to(torch.int64)
                   .sum()) for t in bufs.values())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=34816)
    ap.add_argument("--k", type=int, default=5120)
    ap.add_argument("--check", action="store_true", help="CPU: sums against torch, no timing")
    ap.add_argument("--gluon", default="",
                    help="comma-separated MmaConfigs: time the W12-MMA kernel's loads alone")
    ap.add_argument("--levels", default="0",
                    help="--gluon: comma-separated 0 loads, 1 + x loads, 2 + decode, 3 + MMA")
    ap.add_argument("--m", default="2", help="--gluon levels >= 1: activation rows")
    ap.add_argument("--words", default="64",
                    help="comma-separated H words per row and round (64: k2r1a2s8's rounds); "
                    "empty: none")
    args = ap.parse_args()
    if args.check:
        N, K = 32, 1024
        for name, spec in layouts(N, K, "cpu").items():
            out = torch.zeros(N // ROWS, dtype=torch.int32)
            got = int(run(N, spec, out, 1).to(torch.int64).sum()) & 0xFFFFFFFF
            want = expected(spec) & 0xFFFFFFFF
            print(f"{name:12s} sum {'PASS' if got == want else 'FAIL'}", flush=True)
            if got != want:
                return 1
        return 0
    from specpilot.w12 import kernel as K

    N, Kd = args.n, args.k
    print(f"{torch.cuda.get_device_name()}, N {N}, K {Kd}", flush=True)
    if args.gluon:
        gluon_probe(N, Kd, args.gluon.split(","), [int(v) for v in args.levels.split(",")],
                    [int(v) for v in args.m.split(",")])
    todo = [(f"{name} w{w}", spec) for w in [int(v) for v in args.words.split(",") if v]
            for name, spec in layouts(N, Kd, "cuda", w).items()]
    for name, spec in todo:
        nbytes = sum(st.nbytes() for st in {t.untyped_storage().data_ptr(): t.untyped_storage()
                                            for t in spec[:spec[13]]}.values())
        copies = max(2, -(-512 * 2**20 // nbytes))
        ring = [spec] + [layouts_copy(spec) for _ in range(copies - 1)]
        out = torch.zeros(N // ROWS, dtype=torch.int32, device="cuda")
        row = []
        for stages in (1, 3):
            run(N, spec, out, stages)
            us = K.time_calls_us(lambda i, s=stages: run(N, ring[i], out, s), len(ring))
            row.append(f"st{stages} {us:7.1f} us {nbytes / us / 1e6:5.2f} TB/s")
        print(f"{name:16s} {nbytes / 1e6:6.0f} MB  " + "  ".join(row), flush=True)
    return 0


def layouts_copy(spec):
    """A copy of one layout's buffers with its views rebuilt on the copy (same offsets)."""
    streams = spec[:3]
    bufs = {}
    out = []
    for t in streams:
        st = t.untyped_storage()
        if st.data_ptr() not in bufs:
            base = torch.empty(0, dtype=torch.int32, device=t.device).set_(st)
            bufs[st.data_ptr()] = base.clone()
        nb = bufs[st.data_ptr()]
        out.append(torch.as_strided(nb, t.shape, t.stride(), t.storage_offset()))
    return (*out, *spec[3:])


if __name__ == "__main__":
    sys.exit(main())
