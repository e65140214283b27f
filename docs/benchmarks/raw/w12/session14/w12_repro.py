# session 14: is w12_matmul(reproducible=True) == bf16_matmul bit for bit at the demo model's shapes,
# over decode and prefill M, with escapes, default configs? And is each deterministic run to run?
import os, sys, torch
os.environ["SPECPILOT_W12_AUTOTUNE"] = "0"
sys.path.insert(0, os.getcwd())
from specpilot.w12 import kernel as k
from specpilot.w12.format import encode, bitwise_equal
torch.manual_seed(0)
dev = "cuda"
rows = []
for (N, K) in [(576, 576), (192, 576), (1536, 576), (576, 1536), (960, 576), (3072, 576)]:
    w = (torch.randn(N, K, device=dev) * 0.02)
    w[torch.rand(N, K, device=dev) < 1e-3] *= 3000.0          # out-of-window values -> escapes
    w = w.to(torch.bfloat16)
    for per_row in (False, True):
        t = encode(w, per_row=per_row)
        p = k.prepare(t, dev)
        dec = k.decode_w12_gpu(p)
        dec_ok = bitwise_equal(dec, w)
        for M in (1, 3, 16, 17, 40, 64, 65, 200, 1000, 2600):
            x = (torch.randn(M, K, device=dev)).to(torch.bfloat16)
            cfg = k.default_config(M, N, K, k._num_sms(x.device))
            a = k.w12_matmul(x, p, reproducible=True)
            a2 = k.w12_matmul(x, p, reproducible=True)
            b = k.bf16_matmul(x, w)
            b2 = k.bf16_matmul(x, w)
            c = k.w12_matmul(x, p, reproducible=True, config=cfg)
            same = torch.equal(a, b); det = torch.equal(a, a2) and torch.equal(b, b2)
            diff = (a.float() - b.float()).abs().max().item()
            ref = (x.float() @ w.float().t())
            err = ((b.float() - ref).abs().max() / ref.abs().max()).item()
            rows.append((N, K, per_row, t.esc.numel(), dec_ok, M, cfg, same, det, diff, err, torch.equal(a, c)))
            print(f"N{N:5d} K{K:5d} row={int(per_row)} esc={t.esc.numel():4d} dec={int(dec_ok)} M{M:5d} "
                  f"bm{cfg.block_m} bk{cfg.block_k} s{cfg.split_k} st{cfg.num_stages} carry={int(cfg.carry)} "
                  f"repro==bf16 {int(same)} det {int(det)} maxdiff {diff:.3g} relerr {err:.2g}", flush=True)
bad = [r for r in rows if not (r[4] and r[7] and r[8])]
print(f"SUMMARY {len(rows) - len(bad)}/{len(rows)} ok (decode exact, repro == bf16, deterministic)")
