"""Exploration: does Triton feed wgmma's A operand from registers (no bf16 smem round trip) for
W12-style decodes, and what does each variant cost? One shape (Muse gate_up), M = 1 and 16."""
import sys
import re
import torch
import triton
import triton.language as tl

sys.path.insert(0, ".")
from specpilot.w12 import kernel as KK  # noqa: E402


@triton.jit
def _dec(w_tile, h_tile, j, HALF, hbt, MODE: tl.constexpr):
    l0 = tl.load(w_tile + j)
    l1 = tl.load(w_tile + HALF + j)
    hh = tl.load(h_tile + j)
    if MODE == 5:
        t0, t1 = tl.inline_asm_elementwise(KK.DECODE_PTX, "=r,=r,=r,=r,r,r,r,r",
                                           [l0, l1, hh, hbt], dtype=(tl.uint16, tl.uint16),
                                           is_pure=True, pack=4)
    else:
        t0 = (hh.to(tl.uint16) << 8) | l0.to(tl.uint16)
        t1 = (hh.to(tl.uint16) << 4) | l1.to(tl.uint16)
    return t0.to(tl.bfloat16, bitcast=True), t1.to(tl.bfloat16, bitcast=True)


@triton.jit
def k_var(x_ptr, y_ptr, w_ptr, h_ptr, M, N, HALF, sw, sh, STEPS, MODE: tl.constexpr,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rn = pid_n * BN + tl.arange(0, BN)
    rm = tl.arange(0, BM)
    rk = tl.arange(0, BK)
    m_ok = rm < M
    acc = tl.zeros((BN, BM), tl.float32)
    w_tile = w_ptr + rn.to(tl.int64)[:, None] * sw + rk[None, :]
    h_tile = h_ptr + rn.to(tl.int64)[:, None] * sh + rk[None, :]
    x_tile = x_ptr + rm[None, :] * (2 * HALF) + rk[:, None]
    hbt = tl.zeros((BN, BK), tl.uint8) + 60
    if MODE >= 4:  # decoded tiles carried across iterations: A becomes a block argument
        s0 = pid_k * STEPS
        c0, c1 = _dec(w_tile, h_tile, s0 * BK, HALF, hbt, MODE)
        for s in range(s0, s0 + STEPS):
            j = s * BK
            x0 = tl.load(x_tile + j, mask=m_ok[None, :], other=0.0)
            x1 = tl.load(x_tile + HALF + j, mask=m_ok[None, :], other=0.0)
            jn = tl.minimum(j + BK, (s0 + STEPS - 1) * BK)
            n0, n1 = _dec(w_tile, h_tile, jn, HALF, hbt, MODE)
            acc = tl.dot(c0, x0, acc)
            acc = tl.dot(c1, x1, acc)
            c0 = n0
            c1 = n1
    else:
        for s in range(pid_k * STEPS, (pid_k + 1) * STEPS):
            j = s * BK
            x0 = tl.load(x_tile + j, mask=m_ok[None, :], other=0.0)
            x1 = tl.load(x_tile + HALF + j, mask=m_ok[None, :], other=0.0)
            if MODE == 0:  # bf16 weights
                w0 = tl.load(w_tile + j)
                w1 = tl.load(w_tile + HALF + j)
            else:
                l0 = tl.load(w_tile + j)
                l1 = tl.load(w_tile + HALF + j)
                hh = tl.load(h_tile + j)
                if MODE == 1:  # current: v2 PTX pack=4
                    t0, t1 = tl.inline_asm_elementwise(KK.DECODE_PTX, "=r,=r,=r,=r,r,r,r,r",
                                                       [l0, l1, hh, hbt], dtype=(tl.uint16, tl.uint16),
                                                       is_pure=True, pack=4)
                elif MODE == 2:  # v1-style elementwise decode in plain ops (per element)
                    h32 = hh.to(tl.uint32)
                    d0 = h32 & 7
                    d1 = (h32 >> 4) & 7
                    t0 = (((h32 & 8) << 12) | (tl.where(d0 == 7, 0, d0 + 60) << 8)
                          | l0.to(tl.uint32)).to(tl.uint16)
                    t1 = (((h32 & 128) << 8) | (tl.where(d1 == 7, 0, d1 + 60) << 8)
                          | l1.to(tl.uint32)).to(tl.uint16)
                else:  # 3: structural lower bound: cheapest elementwise combine (not a real decode)
                    t0 = (hh.to(tl.uint16) << 8) | l0.to(tl.uint16)
                    t1 = (hh.to(tl.uint16) << 4) | l1.to(tl.uint16)
                w0 = t0.to(tl.bfloat16, bitcast=True)
                w1 = t1.to(tl.bfloat16, bitcast=True)
            acc = tl.dot(w0, x0, acc)
            acc = tl.dot(w1, x1, acc)
    y = y_ptr + rm[None, :] * N + rn[:, None]
    tl.atomic_add(y, acc, mask=m_ok[None, :])


def main():
    N, K = 39936, 6656
    half = K // 2
    dev = "cuda"
    wb = torch.randn(N, K, device=dev).bfloat16()
    L = torch.randint(0, 256, (N, K), device=dev, dtype=torch.uint8)
    H = torch.randint(0, 256, (N, half), device=dev, dtype=torch.uint8)
    names = {0: "bf16", 1: "v2 ptx pack4", 2: "elementwise plain", 3: "elementwise lower bound",
             4: "carried lower bound", 5: "carried v2 ptx"}
    print(f"{'mode':24s} {'M':>3} {'BN':>4} {'BK':>4} {'w':>2} {'st':>2} {'split':>5} {'us':>8} "
          f"{'GB/s':>7}  A-operand / smem")
    for M in ():
        x = torch.randn(M, K, device=dev).bfloat16()
        for mode in (0, 1, 3, 4, 5):
            for BN, BK, warps, stages, split in ((64, 128, 4, 4, 4), (64, 128, 4, 3, 4),
                                                 (128, 64, 4, 3, 4), (128, 128, 8, 3, 2),
                                                 (64, 64, 4, 4, 8)):
                steps = half // BK // split
                y = torch.zeros(M, N, device=dev, dtype=torch.float32)
                w_arg = wb if mode == 0 else L
                sw = wb.stride(0) if mode == 0 else L.stride(0)
                grid = (N // BN, split)
                try:
                    ck = k_var[grid](x, y, w_arg, H, M, N, half, sw, H.stride(0), steps, MODE=mode,
                                     BM=16, BN=BN, BK=BK, num_warps=warps, num_stages=stages)
                except Exception as e:  # noqa: BLE001
                    print(f"{names[mode]:24s} {M:3d} {BN:4d} {BK:4d} {warps:2d} {stages:2d} fail {e}"[:200])
                    continue
                ms = triton.testing.do_bench(
                    lambda: k_var[grid](x, y, w_arg, H, M, N, half, sw, H.stride(0), steps,
                                        MODE=mode, BM=16, BN=BN, BK=BK, num_warps=warps,
                                        num_stages=stages), warmup=10, rep=60)
                nbytes = wb.numel() * 2 if mode == 0 else L.numel() + H.numel()
                ir = ck.asm["ttgir"]
                dots = [ln for ln in ir.split("\n") if "warp_group_dot " in ln or "tt.dot " in ln]
                a_reg = any(re.search(r"warp_group_dot %\S+, %\S+, %\S+ .*: tensor<", ln)
                            for ln in dots)
                n_alloc = sum("local_alloc" in ln for ln in ir.split("\n"))
                print(f"{names[mode]:24s} {M:3d} {BN:4d} {BK:4d} {warps:2d} {stages:2d} {split:5d} "
                      f"{ms * 1000:8.1f} {nbytes / ms / 1e6:7.0f}  A-from-reg={a_reg} "
                      f"local_alloc={n_alloc} regs={ck.n_regs} spills={ck.n_spills}", flush=True)
                if M == 16 and BN == 64 and BK == 128 and warps == 4 and stages == 4:
                    for ln in dots[:1]:
                        print("    ", ln.strip()[:260])
    # correctness against torch on the decoded weights, full K (split 2 x 13 steps of 128)
    from specpilot.w12.format import W12Tensor, decode
    n_tiles = (N // 64) * ((K + 511) // 512)
    W = decode(W12Tensor((N, K), L, H, torch.tensor([60], dtype=torch.uint8, device=dev),
                         torch.zeros(n_tiles + 1, dtype=torch.int32, device=dev),
                         torch.zeros(0, dtype=torch.int32, device=dev)))
    x = torch.randn(16, K, device=dev).bfloat16()
    ref = x.float() @ W.float().t()
    for mode, stages, warps in ((0, 3, 4), (1, 3, 4), (5, 1, 4), (5, 2, 4), (5, 3, 4), (5, 4, 4),
                                (5, 3, 8)):
        y = torch.zeros(16, N, device=dev, dtype=torch.float32)
        w_arg = W if mode == 0 else L
        k_var[(N // 64, 2)](x, y, w_arg, H, 16, N, half, w_arg.stride(0), H.stride(0), 13,
                            MODE=mode, BM=16, BN=64, BK=128, num_warps=warps, num_stages=stages)
        d = ((y - ref).abs().max() / ref.abs().max()).item()
        print(f"check mode {mode} stages {stages} warps {warps}: max rel err vs torch {d:.2e}",
              flush=True)
    # cuBLAS reference
    for M in (1, 16):
        x = torch.randn(M, K, device=dev).bfloat16()
        ms = triton.testing.do_bench(lambda: torch.matmul(x, wb.t()), warmup=10, rep=60)
        print(f"cuBLAS M={M}: {ms * 1000:.1f} us, {wb.numel() * 2 / ms / 1e6:.0f} GB/s")


if __name__ == "__main__":
    main()
