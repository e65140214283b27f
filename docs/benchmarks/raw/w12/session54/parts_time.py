"""A first look at x resident in parts on the GPU: us per call at 16 rows, cuBLAS bf16, the
first of today's ws candidates and the xres_candidates; o_proj's weights rotated (3 copies),
down's (134 MB, more than L2) one copy."""
import torch
from specpilot.w12 import kernel as Kn, ws
from specpilot.w12.format import encode

dev = torch.device("cuda")
for name, N, K, R in (("qwen o_proj", 5120, 6144, 3), ("qwen down", 5120, 17408, 1)):
    wts = [torch.randn(N, K, device=dev).bfloat16() * 0.02 for _ in range(R)]
    ps = [Kn.prepare(encode(w.cpu()), "cuda") for w in wts]
    a = torch.randn(16, K, device=dev).bfloat16()

    def t(f, n=30):   # a CUDA graph of n calls (w12_ws's host side is not timed), replayed
        for i in range(3):
            f(i % R)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(n):
                f(i % R)
        g.replay()
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        torch.cuda.synchronize(); s.record()
        for _ in range(5):
            g.replay()
        e.record(); torch.cuda.synchronize()
        return s.elapsed_time(e) * 1e3 / (5 * n)
    row = {"cuBLAS": t(lambda i: a @ wts[i].T)}
    cands = ws.candidates(16, N, K, dev)[:1] + ws.xres_candidates(16, N, K, dev)
    for c in cands:
        row[f"ws{c.ws_stages}xr{c.ws_xres}"] = t(lambda i: ws.w12_ws(a, ps[i], c))
    print(name, " ".join(f"{k} {v:.1f}" for k, v in row.items()), flush=True)
