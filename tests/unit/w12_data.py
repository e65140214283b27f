"""Test data and checks shared by the W12 kernel tests (test_w12_kernel.py, test_w12_gemv.py):
edge-value weights, activations, the tolerance check against float64, bitwise equality, a CUDA
graph's output (GPU tests)."""
import torch


def bits(vals):
    """int list of raw 16-bit patterns -> bf16 tensor."""
    return torch.tensor([v - 0x10000 if v >= 0x8000 else v for v in vals], dtype=torch.int16
                        ).view(torch.bfloat16)


# escapes of every kind: subnormals, +-Inf, NaNs with payloads, big outliers, tiny normals;
# plus -0 / +0, which use the escape code without a side entry
EDGE = bits([0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x4780, 0xC6A0, 0x0080, 0x8000,
             0x0000, 0x3F80])
FINITE_EDGE = bits([0x0001, 0x807F, 0x4780, 0xC6A0, 0x0080, 0x8000, 0x0000, 0x2B80])


def make_weight(N, K_, seed, per_row=False, edges=EDGE, n_edges=24, scale=0.02):
    """Random normal bf16 weight with edge values planted; per_row: rows 2**-10 .. 2**10 apart,
    which makes encode() choose per-row bases."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, K_, generator=g) * scale
    if per_row:
        x = x * torch.pow(2.0, torch.randint(-10, 11, (N, 1), generator=g).float())
    x = x.bfloat16()
    if n_edges:
        idx = torch.randperm(x.numel(), generator=g)[:n_edges]
        x.view(-1)[idx] = edges[torch.arange(n_edges) % edges.numel()]
    return x


def acts(M, K_, seed):
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randn(M, K_, generator=g).bfloat16()


def check_close(y, x, w):
    """y (bf16 [M, N]) against x @ w^T in float64: the same non-finite pattern, and finite
    values within one bf16 ulp (the interpreter rounds toward zero) plus fp32 summation error."""
    ref = x.double() @ w.double().t()
    scale = x.double().abs() @ w.double().abs().t()
    yd = y.double().cpu()
    assert y.shape == ref.shape and y.dtype == torch.bfloat16
    fin = torch.isfinite(ref)
    assert torch.equal(fin, torch.isfinite(yd)), "non-finite outputs differ"
    assert torch.equal(torch.isnan(ref), torch.isnan(yd)), "NaN outputs differ"
    inf = torch.isinf(ref)
    assert torch.equal(ref[inf], yd[inf]), "infinite outputs differ"
    err = (yd - ref).abs()[fin]
    tol = (2.0 ** -7) * ref.abs()[fin] + 1e-5 * scale[fin] + 1e-30
    assert bool((err <= tol).all()), f"max err/tol {float((err / tol).max()):.3g}"


def same_bits(a, b):
    return torch.equal(a.contiguous().view(torch.int16).cpu(), b.contiguous().view(torch.int16).cpu())


def replayed(fn):
    """The output of ``fn()`` captured into a CUDA graph, after one replay."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = fn()
    graph.replay()
    torch.cuda.synchronize()
    return y


def check_pdl_modes(monkeypatch, chain, modes) -> None:
    """``chain()`` (a list of GPU outputs) under each (pdl.MODE, GEMV_TRIGGER) of ``modes`` (0:
    PDL off): the same bits eagerly and captured into a CUDA graph (three replays), all finite,
    and the same bits in every mode as in the first."""
    from specpilot.kernels import pdl

    results = []
    for mode, trigger in modes:
        monkeypatch.setattr(pdl, "ENABLED", mode > 0)
        monkeypatch.setattr(pdl, "MODE", mode or 1)
        monkeypatch.setattr(pdl, "GEMV_TRIGGER", {"w12": trigger or 2, "bf16": trigger or 2})
        eager = chain()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outs = chain()
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        assert all(same_bits(a, b) for a, b in zip(eager, outs)), (mode, trigger)
        assert all(torch.isfinite(o.float()).all() for o in outs)
        results.append(outs)
    assert all(same_bits(a, b) for r in results[1:] for a, b in zip(results[0], r))
