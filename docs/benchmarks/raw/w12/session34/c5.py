"""Session 34 call 5: where w12_mma and bf16_mma differ on 300 x 1000 at k4r1a1s4, M = 16."""
import torch
from specpilot.w12 import kernel as Kn, mma
from specpilot.w12.format import encode
from tests.unit.w12_data import acts

for N, K in ((300, 1000), (304, 1000), (300, 1024), (304, 1024)):
    g = torch.Generator().manual_seed(N + K)
    sign = torch.randint(0, 2, (N, K), generator=g).float() * 2 - 1
    x = (sign * (1 + torch.rand(N, K, generator=g))
         * torch.pow(2.0, torch.randint(-9, -2, (N, K), generator=g).float())).bfloat16()
    w = encode(x)
    p, xc = Kn.prepare(w, "cuda"), x.cuda()
    dec_ok = torch.equal(Kn.decode_w12_gpu(p).cpu().view(torch.int16), x.view(torch.int16))
    for M in (9, 16):
        a = acts(M, K, M + 3).cuda()
        cfg = mma.MmaConfig()
        y12, y16 = mma.w12_mma(a, p, cfg), mma.bf16_mma(a, xc, cfg)
        d = (y12.view(torch.int16) != y16.view(torch.int16)).nonzero().tolist()
        ref = a.double() @ xc.double().t()
        e12 = (y12.double() - ref).abs().max().item()
        e16 = (y16.double() - ref).abs().max().item()
        print(f"N={N} K={K} M={M} escapes {w.n_escapes} decode-equal {dec_ok}: {len(d)} differ "
              f"{d[:6]} max err w12 {e12:.3e} bf16 {e16:.3e}", flush=True)
        for r, c in d[:3]:
            print(f"   [{r},{c}] w12 {y12[r, c].item()!r} bf16 {y16[r, c].item()!r} "
                  f"ref {ref[r, c].item()!r}", flush=True)
