"""Can the few-row W12 kernel's K relabelling (specpilot/w12/mma.py) feed Hopper's warpgroup MMA
with the weights as the A operand in registers? A design probe for a 32-64-row W12 kernel
(docs/w12.md, "Not done yet"), not used by the engine.

    python3 scripts/gpu_w12_wgmma_probe.py          # compile for sm_90 (no GPU needed)
    python3 scripts/gpu_w12_wgmma_probe.py --run    # also run on the GPU against torch

One warpgroup loads a [64, 16 S] bf16 weight tile as each thread's contiguous runs of 4 S
columns (rows g and g + 8 of its warp's 16, as mma.sync's A fragment wants), reshapes and
permutes it into the relabelled K order (logical k = 16 s + 8 hi + 2 c + lo holds physical
column 4 S c + 4 s + 2 hi + lo), converts it to wgmma's A dot-operand layout with
``assert_trivial`` (registers renamed only), and multiplies it with x [NT, 16 S] put in shared
memory in the same K order. Prints per case the wgmma count, the weight loads' vector width,
shared-memory allocations and shuffles; with --run the largest error against float64 torch."""
import re
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma
from triton.experimental.gluon._runtime import GluonASTSource


@gluon.jit
def probe(w_ptr, x_ptr, y_ptr, K, S: gl.constexpr, NT: gl.constexpr, PH: gl.constexpr,
          DOT: gl.constexpr, ACC: gl.constexpr, XL: gl.constexpr, SL: gl.constexpr):
    KT: gl.constexpr = 16 * S
    wi = gl.arange(0, 4, layout=gl.SliceLayout(1, gl.SliceLayout(2, PH)))[:, None, None]
    ri = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(2, PH)))[None, :, None]
    ji = gl.arange(0, KT, layout=gl.SliceLayout(0, gl.SliceLayout(1, PH)))[None, None, :]
    ph = gl.load(w_ptr + (16 * wi + ri) * K + ji)                     # [4, 16, 16S] physical
    t = gl.reshape(ph, [4, 16, 4, S, 2, 2])                           # j = c 4S + s 4 + hi 2 + lo
    t = gl.permute(t, [0, 1, 3, 4, 2, 5])                             # -> [w, r, s, hi, c, lo]
    a = gl.reshape(t, [64, KT])                                       # k = 16 s + 8 hi + 2 c + lo
    a = gl.convert_layout(a, DOT, assert_trivial=True)
    # x [KT, NT] in the logical K order: logical k -> physical column
    kk = gl.arange(0, KT, layout=gl.SliceLayout(1, XL))[:, None]
    nn = gl.arange(0, NT, layout=gl.SliceLayout(0, XL))[None, :]
    s_ = kk // 16
    hi = (kk % 16) // 8
    c_ = (kk % 8) // 2
    lo = kk % 2
    j = c_ * (4 * S) + s_ * 4 + hi * 2 + lo
    xv = gl.load(x_ptr + nn * K + j)
    xs = gl.allocate_shared_memory(gl.bfloat16, [KT, NT], SL, xv)
    acc = gl.zeros([64, NT], gl.float32, ACC)
    acc = warpgroup_mma(a, xs, acc)
    mi = gl.arange(0, 64, layout=gl.SliceLayout(1, ACC))[:, None]
    ni = gl.arange(0, NT, layout=gl.SliceLayout(0, ACC))[None, :]
    gl.store(y_ptr + ni * 64 + mi, acc)


def layouts(S: int, NT: int) -> dict:
    """The probe's constexpr layouts: the physical weight tile, wgmma's accumulator and A
    operand, the x gather and x's shared-memory layout."""
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, NT, 16])
    return dict(PH=gl.BlockedLayout([1, 1, 4 * S], [1, 8, 4], [4, 1, 1], [2, 1, 0]), ACC=acc,
                DOT=gl.DotOperandLayout(operand_index=0, parent=acc, k_width=2),
                XL=gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0]),
                SL=gl.NVMMASharedLayout(swizzle_byte_width=min(128, 2 * NT), element_bitwidth=16,
                                        rank=2))


def compile_one(S: int, NT: int) -> None:
    """Compile for sm_90 and print what the code holds."""
    consts = dict(S=S, NT=NT, **layouts(S, NT))
    sig = {"w_ptr": "*bf16", "x_ptr": "*bf16", "y_ptr": "*fp32", "K": "i32"}
    sig.update({k: "constexpr" for k in consts})
    aligned = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 3)}
    k = triton.compile(GluonASTSource(probe, sig, consts, aligned),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    ptx, ttgir = k.asm["ptx"], k.asm["ttgir"]
    v4 = len(re.findall(r"ld\.global[^\n]*v4", ptx))
    v2 = len(re.findall(r"ld\.global[^\n]*v2", ptx))
    print(f"S={S} NT={NT}: wgmma {ptx.count('wgmma.mma_async')}, ld.v4 {v4}, ld.v2 {v2}, "
          f"ld all {ptx.count('ld.global')}, local_alloc {ttgir.count('local_alloc')}, "
          f"convert_layout {ttgir.count('convert_layout')}, shfl {ptx.count('shfl')}", flush=True)


def run_one(S: int, NT: int) -> bool:
    """On a GPU: the probe's y against float64 torch (the relabelled K must give x @ W^T)."""
    import torch

    K = 16 * S
    g = torch.Generator().manual_seed(S * 100 + NT)
    w = torch.randn(64, K, generator=g).bfloat16().cuda()
    x = torch.randn(NT, K, generator=g).bfloat16().cuda()
    y = torch.empty(NT, 64, dtype=torch.float32, device="cuda")
    probe[(1,)](w, x, y, K, S=S, NT=NT, **layouts(S, NT), num_warps=4)
    ref = (x.double() @ w.double().t()).float()
    err = float((y - ref).abs().max())
    ok = err < 1e-3 * K
    print(f"S={S} NT={NT}: GPU max |y - ref| = {err:.3e} ({'PASS' if ok else 'FAIL'})", flush=True)
    return ok


def main() -> int:
    gpu = "--run" in sys.argv
    ok = True
    for S, NT in ((1, 16), (2, 16), (4, 32)):
        compile_one(S, NT)
        if gpu:
            ok &= run_one(S, NT)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
