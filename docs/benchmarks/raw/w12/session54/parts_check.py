"""x resident in parts of K (ws_xres > 1) against torch on the GPU: a few shapes and rows."""
import torch
from specpilot.w12 import kernel as Kn, ws
from specpilot.w12.format import encode
from tests.unit.w12_data import acts, check_close, make_weight

cfgs = [ws.WsConfig(2, ws_ewarp=1, ws_xres=2), ws.WsConfig(4, ws_ewarp=1, ws_xres=3)]
for N, K, narrow in ((1040, 5120, False), (272, 6656, True)):
    x = (torch.rand(N, K) + 1).bfloat16() if narrow else make_weight(N, K, N + K, False,
                                                                        n_edges=N * K // 500)
    p = Kn.prepare(encode(x), "cuda")
    for cfg in cfgs:
        for M in (1, 8, 16):
            if ws.fits(cfg, ws.nt_for(M), K):
                a = acts(M, K, M)
                check_close(ws.w12_ws(a.cuda(), p, cfg), a, x)
                print("PASS", N, K, cfg, M, flush=True)
