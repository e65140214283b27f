"""Triton norm / silu_mul kernels (specpilot/kernels/norm.py) against the torch modules on the GPU:
max abs difference, then timing, at real shapes in bf16 (a script; about a minute on an H200).

    PYTHONPATH=. python scripts/gpu_norm_bench.py [--hidden 5120 6144] [--rows 1 8 16 128 512]

Ops: RMSNorm, ZeroCenteredRMSNorm and the fused residual add + RMSNorm at each hidden size;
Qwen3-style q-norm (24 heads x 256, read in place from a fused qkv output); GatedRMSNorm (48
value heads x 128, the Gated DeltaNet output norm); silu_mul on the halves of a fused gate_up
output at each --intermediate size. Rows = tokens.
RoPE (kernels/rope.py vs RotaryEmbedding's torch code) of q and k, views of a fused qkv output,
at random positions, for Qwen3.8 (24 q / 4 kv heads of 256, 64 rotary channels) and
Muse-Glimmer (heads from specpilot/model_configs/*/config.json); D = head_dim; its max diff
must be 0 (bit-identical). Muse-Glimmer's weightless qk-norm (MuseRMSNorm) on the q view.

Timing: every call reads a different set of inputs from a ring of >= --ring-mb (default 256 MB,
several times the H200's 60 MB L2), so no call finds its inputs in L2. "eager": CUDA events around
each call, median of --iters calls after warm-up (includes the host's launch cost where it exceeds
the GPU time: many small torch kernels, one Python-launched Triton kernel). "graph": --iters calls
captured in one CUDA graph (how decode runs), median of 5 replays / --iters (device time only).
Speedups are torch / Triton time ratios (> 1: Triton faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from specpilot.layers import norm as layers_norm  # noqa: E402
from specpilot.layers.norm import GatedRMSNorm, RMSNorm, ZeroCenteredRMSNorm  # noqa: E402
from specpilot.layers.rotary import RotaryEmbedding  # noqa: E402
from specpilot.models.muse_glimmer import MuseRMSNorm  # noqa: E402

DTYPE = torch.bfloat16
EPS = 1e-6
CONFIGS = os.path.join(os.path.dirname(__file__), "..", "specpilot", "model_configs")
ROPE_MODELS = (("Qwen3.8", "qwen38-27b"), ("Muse-Glimmer", "muse-glimmer-30b"))
ROPE_MAX_POS = 32768  # table rows; positions are drawn below this


def ring(shape, set_bytes_total: int, ring_bytes: int, scale: float = 1.0) -> torch.Tensor:
    """[n, *shape] random bf16 inputs with n * set_bytes_total >= ring_bytes (n >= 2)."""
    n = max(2, -(-ring_bytes // set_bytes_total))
    return (torch.randn(n, *shape, device="cuda") * scale).to(DTYPE)


def norm_module(cls, dim: int) -> torch.nn.Module:
    m = cls(dim, EPS).cuda()
    with torch.no_grad():
        m.weight.copy_(torch.randn(dim, device="cuda") * 0.2 + (0.0 if cls is ZeroCenteredRMSNorm
                                                                 else 1.0))
    return m.to(DTYPE)


def time_us(fn, n_sets: int, iters: int) -> tuple[float, float]:
    """(eager, graph) us per call of fn(i), i rotating over the ring (module docstring)."""
    for i in range(10):
        fn(i % n_sets)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(iters)]
    for i, (start, end) in enumerate(events):
        start.record()
        fn((10 + i) % n_sets)
        end.record()
    torch.cuda.synchronize()
    eager = statistics.median(s.elapsed_time(e) for s, e in events) * 1e3

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(iters):
            fn(i % n_sets)
    graph.replay()
    reps = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        reps.append(start.elapsed_time(end) * 1e3 / iters)
    del graph
    torch.cuda.empty_cache()
    return eager, statistics.median(reps)


def rope_setup(folder: str):
    """(Hq, Hkv, head_dim, RotaryEmbedding on the GPU) from a model_configs folder."""
    with open(os.path.join(CONFIGS, folder, "config.json")) as f:
        c = json.load(f)
    c = c.get("text_config", c)
    hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    cfg = argparse.Namespace(rope_parameters=c.get("rope_parameters"),
                             rope_theta=c.get("rope_theta", 10000.0),
                             partial_rotary_factor=c.get("partial_rotary_factor", 1.0))
    rot = RotaryEmbedding(cfg, hd, ROPE_MAX_POS).cuda()
    return c["num_attention_heads"], c["num_key_value_heads"], hd, rot


def rope_cases(rows: int, rb: int, K, R):
    """RoPE rows for each ROPE_MODELS entry, and Muse-Glimmer's weightless qk-norm."""
    for name, folder in ROPE_MODELS:
        hq, hkv, hd, rot = rope_setup(folder)
        qkv = ring((rows, (hq + 2 * hkv) * hd), rows * (hq + 2 * hkv) * hd * 2, rb)
        pos = torch.randint(0, ROPE_MAX_POS, (len(qkv), rows), device="cuda")

        def qk(i, qkv=qkv, hq=hq, hkv=hkv, hd=hd, rows=rows):
            q, k, _ = qkv[i].split([hq * hd, hkv * hd, hkv * hd], dim=-1)
            return q.view(rows, hq, hd), k.view(rows, hkv, hd)
        yield (f"rope {name} {hq}/{hkv}x{hd} r{rot.rotary_dim} view", rows, hd,
               lambda i, rot=rot, qk=qk, pos=pos: rot(pos[i], *qk(i)),
               lambda i, rot=rot, qk=qk, pos=pos: R.rope(pos[i], *qk(i), rot.cos_table,
                                                         rot.sin_table), len(qkv))
        if folder.startswith("muse"):
            m = MuseRMSNorm(None, EPS, with_scale=False)
            yield (f"muse qk_norm (no w) {hq}x{hd} view", rows, hd,
                   lambda i, m=m, qk=qk: m(qk(i)[0]),
                   lambda i, qk=qk: K.rms_norm_fp32_weight(qk(i)[0], None, EPS), len(qkv))


def same(a, b) -> bool:
    if isinstance(a, tuple):
        return all(same(x, y) for x, y in zip(a, b))
    return torch.equal(a, b)


def max_diff(a, b) -> float:
    if isinstance(a, tuple):
        return max(max_diff(x, y) for x, y in zip(a, b))
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    return (a.float() - b.float()).abs().max().item()


def cases(args, K, R):
    """Yields (op, rows, D, torch fn(i), triton fn(i), number of input sets)."""
    rb = args.ring_mb << 20
    for rows in args.rows:
        for d in args.hidden:
            x = ring((rows, d), rows * d * 2, rb, scale=3.0)
            for name, cls, zc in (("rms_norm", RMSNorm, False),
                                  ("rms_norm (1+w)", ZeroCenteredRMSNorm, True)):
                m = norm_module(cls, d)
                yield (name, rows, d, lambda i, m=m: m(x[i]),
                       lambda i, m=m, zc=zc: K.rms_norm(x[i], m.weight, EPS, zc), len(x))
            m = norm_module(RMSNorm, d)
            r = torch.randn_like(x)

            def torch_add_norm(i, m=m, r=r):
                h = x[i] + r[i]
                return m(h), h
            yield ("add+rms_norm", rows, d, torch_add_norm,
                   lambda i, m=m, r=r: K.rms_norm(x[i], m.weight, EPS, residual=r[i]), len(x))
        heads, hd = 24, 256  # q-norm: a [rows, 24, 256] view of a fused qkv output
        qkv = ring((rows, heads * hd + 2 * 4 * hd), rows * heads * hd * 2, rb)
        m = norm_module(ZeroCenteredRMSNorm, hd)

        def q(i, qkv=qkv, rows=rows):
            return qkv[i, :, :heads * hd].view(rows, heads, hd)
        yield (f"q_norm (1+w) {heads}x{hd} view", rows, hd, lambda i, m=m: m(q(i)),
               lambda i, m=m: K.rms_norm(q(i), m.weight, EPS, True), len(qkv))
        hv, dv = 48, 128  # GatedDeltaNet output norm: rows * 48 heads of 128
        xg = ring((2, rows * hv, dv), rows * hv * dv * 4, rb, scale=0.5)
        m = norm_module(GatedRMSNorm, dv)
        yield (f"gated_rms_norm {hv}x{dv}", rows, dv, lambda i, m=m: m(xg[i, 0], xg[i, 1]),
               lambda i, m=m: K.gated_rms_norm(xg[i, 0], xg[i, 1], m.weight, EPS), len(xg))
        for n in args.intermediate:
            gu = ring((rows, 2 * n), rows * n * 4, rb, scale=3.0)

            def torch_silu_mul(i, n=n, gu=gu):
                gate, up = gu[i].split([n, n], dim=-1)
                return torch.nn.functional.silu(gate) * up

            def triton_silu_mul(i, n=n, gu=gu):
                return K.silu_mul(*gu[i].split([n, n], dim=-1))
            yield "silu_mul", rows, n, torch_silu_mul, triton_silu_mul, len(gu)
        yield from rope_cases(rows, rb, K, R)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, nargs="+", default=[5120, 6144])
    p.add_argument("--intermediate", type=int, nargs="+", default=[17408, 25600])
    p.add_argument("--rows", type=int, nargs="+", default=[1, 8, 16, 128, 512])
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--ring-mb", type=int, default=256)
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_norm_bench.py needs a CUDA GPU (torch.cuda.is_available() is false)")
    from specpilot.kernels import norm as K
    from specpilot.kernels import rope as R

    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, bf16; eager / graph: "
          "see the docstring; speedup = torch / triton")
    print("| op | rows | D | torch us | triton us | speedup | graph torch us | graph triton us "
          "| graph speedup | max diff |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    worst = rope_worst = 0.0
    with torch.no_grad():
        for op, rows, d, torch_fn, triton_fn, n_sets in cases(args, K, R):
            layers_norm.USE_TRITON = False  # the modules run their torch code
            ref = torch_fn(0)
            diff = max_diff(triton_fn(0), ref)
            layers_norm.USE_TRITON = True  # the modules' own dispatch must give the kernel's
            if "silu" not in op and "add" not in op:
                assert same(torch_fn(0), triton_fn(0)), f"{op}: module does not dispatch"
            layers_norm.USE_TRITON = False
            worst = max(worst, diff)
            if op.startswith("rope"):
                rope_worst = max(rope_worst, diff)
            (te, tg), (ke, kg) = (time_us(f, n_sets, args.iters) for f in (torch_fn, triton_fn))
            print(f"| {op} | {rows} | {d} | {te:.1f} | {ke:.1f} | {te / ke:.2f} | {tg:.1f} "
                  f"| {kg:.1f} | {tg / kg:.2f} | {diff:.3g} |", flush=True)
    print(f"worst max abs diff: {worst:.3g} (bf16 outputs; one ulp at |x| in [2, 4) is 0.0156)")
    if rope_worst:
        sys.exit(f"RoPE is not bit-identical to torch: max abs diff {rope_worst:.3g}")


if __name__ == "__main__":
    main()
