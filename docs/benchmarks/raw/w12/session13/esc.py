"""Escape-epilogue cost: same planes with and without their escape list, epilogue chunk 16/32/64,
tuned configs of run 5 (no autotuning), M = 1 and 16, three narrow layers and one wide one."""
import json
import sys
import torch
import triton
sys.path.insert(0, ".")
from specpilot.w12 import kernel as K  # noqa: E402
from specpilot.w12.format import encode, W12Tensor  # noqa: E402

tuned = {k: K.GemmConfig(**v) for k, v in json.load(open(".gpu5/w12_tune.json")).items()}
dev = "cuda"
print(f"{'layer':22s} {'M':>3} {'cuBLAS':>8} {'no esc':>8} {'esc16':>8} {'esc32':>8} {'esc64':>8}  n_esc  cfg")
for N, Kd, name in ((5120, 17408, "qwen mlp down"), (16480, 5120, "qwen gdn in_proj"),
                    (5120, 6144, "qwen o/out_proj"), (6656, 4096, "muse o_proj"),
                    (34816, 5120, "qwen gate_up")):
    g = torch.Generator().manual_seed(0)
    blk = (torch.randn(1024, Kd, generator=g) * 0.02).bfloat16()
    reps = N // 1024 + 1
    x_full = blk.repeat(reps, 1)[:N].contiguous().to(dev)
    w = encode(x_full)
    p = K.prepare(w, dev)
    n_tiles = w.esc_off.numel() - 1
    w0 = W12Tensor(w.shape, w.L, w.H, w.hb, torch.zeros(n_tiles + 1, dtype=torch.int32, device=dev),
                   torch.zeros(0, dtype=torch.int32, device=dev))
    p0 = K.prepare(w0, dev)
    for M in (1, 16):
        x = torch.randn(M, Kd, device=dev).bfloat16()
        key = f"w12|NVIDIA_H200|m{K.m_bucket(M)}|n{N}|k{Kd}"
        cfg = tuned.get(key) or K.default_config(M, N, Kd)
        ref = x.float() @ x_full.float().t()
        t = {"cublas": triton.testing.do_bench(lambda: torch.matmul(x, x_full.t()), rep=40)}
        K.ESC_CHUNK = 16
        t["noesc"] = triton.testing.do_bench(lambda: K._launch(x, p0, cfg, True, 1), rep=40)
        for c in (16, 32, 64):
            K.ESC_CHUNK = c
            y = K._launch(x, p, cfg, True, 1)
            err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
            assert err < 1e-2, (name, M, c, err)
            t[c] = triton.testing.do_bench(lambda: K._launch(x, p, cfg, True, 1), rep=40)
        print(f"{name:22s} {M:3d} " + " ".join(f"{t[k] * 1e3:8.1f}" for k in ("cublas", "noesc", 16, 32, 64))
              + f"  {w.n_escapes}  bn{cfg.block_n} bk{cfg.block_k} sp{cfg.split_k} st{cfg.num_stages} "
              f"c{int(cfg.carry)}", flush=True)
