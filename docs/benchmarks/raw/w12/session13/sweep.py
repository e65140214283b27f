"""Config sweep of the production W12 kernel (carry on/off) on two shapes, M = 1 and 16."""
import itertools
import sys
import torch
import triton
sys.path.insert(0, ".")
from specpilot.w12 import kernel as K  # noqa: E402
from specpilot.w12.format import encode  # noqa: E402

dev = "cuda"
for (N, Kd, name) in ((39936, 6656, "muse gate_up"), (5120, 17408, "qwen down")):
    blk = (torch.randn(1024, Kd) * 0.02).bfloat16()
    w = encode(blk.to(dev))
    reps = N // 1024 + 1
    from specpilot.w12.format import W12Tensor
    import specpilot.w12.format as F
    L = w.L.repeat(reps, 1)[:N].contiguous()
    H = w.H.repeat(reps, 1)[:N].contiguous()
    n_tiles = (N + 63) // 64 * ((L.shape[1] + 511) // 512)
    wt = W12Tensor((N, Kd), L, H, w.hb, torch.zeros(n_tiles + 1, dtype=torch.int32, device=dev),
                   torch.zeros(0, dtype=torch.int32, device=dev))   # no escapes: main loop only
    p = K.prepare(wt, dev)
    wb = F.decode(wt)
    for M in (1, 16):
        x = torch.randn(M, Kd, device=dev).bfloat16()
        ref = x.float() @ wb.float().t()
        cub = triton.testing.do_bench(lambda: torch.matmul(x, wb.t()), warmup=5, rep=40)
        res = []
        for bn, bk, warps, stages, split, carry in itertools.product(
                (64, 128), (64, 128), (4, 8), (2, 3, 4), (1, 2, 4), (True, False)):
            if bn == 128 and bk == 128 and stages == 4:
                continue
            cfg = K.GemmConfig(16, bn, bk, split, warps, stages, carry)
            try:
                y = K._launch(x, p, cfg, True, 1)
                err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
                t = triton.testing.do_bench(lambda: K._launch(x, p, cfg, True, 1), warmup=5, rep=30)
            except Exception as e:  # noqa: BLE001
                continue
            res.append((t, cfg, err))
        res.sort(key=lambda r: r[0])
        print(f"{name} M={M}: cuBLAS {cub * 1e3:.1f} us", flush=True)
        for t, cfg, err in res[:8]:
            print(f"   {t * 1e3:7.1f} us  x{cub / t:.3f}  bn{cfg.block_n} bk{cfg.block_k} w{cfg.num_warps} "
                  f"st{cfg.num_stages} sp{cfg.split_k} carry={cfg.carry} err {err:.1e}", flush=True)
        for carry in (True, False):
            best = [r for r in res if r[1].carry == carry][:1]
            if best:
                print(f"   best carry={carry}: {best[0][0] * 1e3:.1f} us", flush=True)
        bad = [r for r in res if r[2] > 1e-2]
        print(f"   {len(res)} configs ran, {len(bad)} with err > 1e-2", flush=True)
