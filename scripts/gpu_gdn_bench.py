"""Gated DeltaNet recurrence on the GPU (a script): our Triton kernel (kernels/gdn.py) checked
against the torch reference, then timed inside CUDA graphs at the Qwen3.8-27B head shape
(16 key heads, 48 value heads, 128 x 128 fp32 state per head, 48 recurrent layers), next to
fla-core's kernels when fla-core is installed, and the verify state traffic of our replay scheme
against per-position snapshots.

    python scripts/gpu_gdn_bench.py [--out result.json]

Rows timed (one layer unless noted; median of graph replays of 20 launches each):
  decode    T=1 per request, state read + written in the pool
  verify    T=B rows, state read only (the replay scheme's verify)
  commit    all 48 layers in one launch, replaying a+1 = B/2 rows, state read + written
  snapshot  the alternative's extra traffic: writing B states per request per layer (a copy)
  fla-rec   fla fused_recurrent_gated_delta_rule, same rows, states gathered/scattered by us
  fla-chunk fla chunk_gated_delta_rule (prefill; eager, it builds chunk indices on the host,
            compared with ours eager too)
  conv      kernels/conv.py against the torch ops it replaced (bf16, C = 10240), diff and time

--fused: only the one-launch DECODE conv + recurrence kernel (conv_gated_delta_decode) against
the two launches it replaces (causal_conv, then gated_delta_rule), one layer, bf16, over a few
(block_v, num_warps) settings; max abs diff of the outputs. (Graph replays of one kernel back to
back: the launch gaps a whole step pays between kernels are mostly hidden here.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from specpilot.kernels.gdn import gated_delta_rule  # noqa: E402
from specpilot.layers.gdn import delta_rule, l2norm  # noqa: E402

HK, HV, DK, DV, LAYERS = 16, 48, 128, 128, 48


def inputs(n: int, t: int, dtype=torch.bfloat16, layers: int = 0):
    lead = (layers,) if layers else ()
    dev = "cuda"
    y = torch.randn(*lead, n * t, 2 * HK * DK + HV * DV, device=dev, dtype=dtype)
    q, k, v = y.split([HK * DK, HK * DK, HV * DV], dim=-1)
    g = -torch.rand(*lead, n * t, HV, device=dev) * 0.5
    beta = torch.rand(*lead, n * t, HV, device=dev)
    return q, k, v, g, beta


def meta(n: int, t: int, rows: list[int] | None = None, lens: int | None = None):
    rows = rows or list(range(n))
    m = torch.tensor([rows, [0] * n, [i * t for i in range(n)], [lens or t] * n],
                     dtype=torch.int32, device="cuda")
    return m[0], m[1], m[2], m[3]


def check() -> float:
    """fp32: kernel == torch reference (outputs and final states), several batch shapes, and the
    all-layer commit == per-layer runs. Returns the worst max abs difference."""
    torch.manual_seed(0)
    worst = 0.0
    for n, t in ((1, 1), (3, 1), (2, 8), (4, 16), (1, 64)):
        q, k, v, g, beta = inputs(n, t, torch.float32)
        pool = torch.randn(n + 2, HV, DK, DV, device="cuda") * 0.1
        ref_pool = pool.clone()
        rows = list(range(2, n + 2))
        out = gated_delta_rule(q, k, v, g, beta, pool, *meta(n, t, rows), key_heads=HK,
                               scale=DK ** -0.5)
        rep = HV // HK
        for i in range(n):
            s = slice(i * t, (i + 1) * t)
            qq = l2norm(q[s].reshape(t, HK, DK)).repeat_interleave(rep, 1) * DK ** -0.5
            kk = l2norm(k[s].reshape(t, HK, DK)).repeat_interleave(rep, 1)
            o, st = delta_rule(qq, kk, v[s].reshape(t, HV, DV), g[s], beta[s], ref_pool[rows[i]])
            worst = max(worst, (o - out[s]).abs().max().item(),
                        (st - pool[rows[i]]).abs().max().item())
    # layered commit (3 layers, lengths 5 of 8) vs one layer at a time
    n, t, layers = 2, 8, 3
    q, k, v, g, beta = inputs(n, t, torch.float32, layers)
    pool = torch.randn(layers, n, HV, DK, DV, device="cuda") * 0.1
    per_layer = pool.clone()
    gated_delta_rule(None, k, v, g, beta, pool, *meta(n, t, lens=5), key_heads=HK)
    for lyr in range(layers):
        gated_delta_rule(None, k[lyr], v[lyr], g[lyr], beta[lyr], per_layer[lyr],
                         *meta(n, t, lens=5), key_heads=HK)
    worst = max(worst, (pool - per_layer).abs().max().item())
    # gates formed in the kernel from the raw projections == g, beta computed in torch
    a, b = g * 4, beta - 0.5
    a_log, dt_bias = torch.randn(HV, device="cuda") * 0.5, torch.randn(HV, device="cuda")
    p1, p2 = torch.zeros(2, n, HV, DK, DV, device="cuda")
    o1 = gated_delta_rule(q[0], k[0], v[0], a[0], b[0], p1, *meta(n, t), key_heads=HK,
                          gate=(a_log, dt_bias))
    o2 = gated_delta_rule(q[0], k[0], v[0], -a_log.exp() * torch.nn.functional.softplus(
        a[0] + dt_bias), b[0].sigmoid(), p2, *meta(n, t), key_heads=HK)
    worst = max(worst, (o1 - o2).abs().max().item(), (p1 - p2).abs().max().item())
    print(f"check fp32 kernel vs torch reference: max abs diff {worst:.2e}", flush=True)
    return worst


def check_chunked_prefill() -> float | None:
    """The engine's EXTEND path with fla-core's chunked kernel (state_pool.TensorRecurrentBatch)
    against the same batch through our recurrent kernel: bf16 inputs, a fresh request and one
    continuing from a non-zero state. Returns the worst max abs difference (outputs, states)."""
    from specpilot.engine.state_pool import RecurrentStatePool, TensorRecurrentBatch, fla_chunked

    if fla_chunked() is None:
        return None
    torch.manual_seed(1)
    pool = RecurrentStatePool(1, 4, 2 * HK * DK + HV * DV, 4, HV, DK, DV, torch.device("cuda"))
    pool.rec.normal_(0, 0.05)
    pool.set_gates(torch.randn(1, HV, device="cuda") * 0.5,
                   torch.randn(1, HV, device="cuda"))
    saved = pool.rec.clone()
    lens = [300, 70]
    q, k, v, _, _ = inputs(1, sum(lens))
    a = torch.randn(sum(lens), HV, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(sum(lens), HV, device="cuda", dtype=torch.bfloat16)
    res = []
    for chunked in (True, False):
        pool.rec.copy_(saved)
        rb = TensorRecurrentBatch(pool, torch.bfloat16, 4).prepare([2, 1], [0, 40], lens, False)
        assert rb.chunked is not None  # fla present, 300 rows
        if not chunked:
            rb.chunked = None
        out = rb.delta(0, q, k, v, a, b, DK ** -0.5)  # raw gate projections
        res.append((out, pool.rec[0, [2, 1]].clone()))
    worst = max((res[0][0] - res[1][0]).abs().max().item(),
                (res[0][1] - res[1][1]).abs().max().item())
    print(f"check chunked prefill (fla) vs recurrent kernel, bf16 inputs: max abs diff "
          f"{worst:.2e} (outputs scale {res[1][0].abs().max().item():.2f})", flush=True)
    return worst


def sweep() -> list[dict]:
    """Tile width over Dv x warps per program, per case: median graph time, best first."""
    out = []
    cases = ((1, 1, False), (32, 1, False), (1, 8, False), (1, 16, False), (8, 16, False),
             (32, 16, False), (1, 8, True), (8, 8, True))
    for n, t, commit in cases:
        layers = LAYERS if commit else 0
        q, k, v, g, beta = inputs(n, t, layers=layers)
        pool = torch.zeros(*((LAYERS,) if commit else ()), n + 1, HV, DK, DV, device="cuda")
        m = meta(n, t, lens=t // 2 if commit else None)
        res = []
        for bv in (8, 16, 32, 64):
            for nw in (1, 2, 4, 8):
                if commit:
                    fn = lambda: gated_delta_rule(None, k, v, g, beta, pool, *m,  # noqa: E731
                                                  key_heads=HK, block_v=bv, num_warps=nw)
                else:
                    fn = lambda: gated_delta_rule(q, k, v, g, beta, pool, *m,  # noqa: E731
                                                  key_heads=HK, scale=DK ** -0.5,
                                                  write_state=t == 1, block_v=bv, num_warps=nw)
                res.append((1000 * graph_ms(fn, launches=3 if commit else 10, reps=7), bv, nw))
        res.sort()
        row = dict(case=("commit" if commit else "decode" if t == 1 else "verify"), requests=n,
                   rows=t, best=[dict(us=u, block_v=b, num_warps=w) for u, b, w in res[:4]],
                   default_us=next(u for u, b, w in res if b == 32 and w == 4))
        out.append(row)
        print(f"sweep {row['case']:7} {n:3} x {t:2}: default {row['default_us']:8.1f} us; best "
              + ", ".join(f"{u:.1f} (bv {b}, warps {w})" for u, b, w in res[:3]), flush=True)
    return out


def conv_rows(bw: float) -> list[dict]:
    """kernels/conv.py (decode / verify conv + SiLU over the window pool) against the torch ops it
    replaced, bf16, C = 10240 (Qwen3.8-27B's conv channels), K = 4: max abs diff and graph time."""
    import torch.nn.functional as F

    from specpilot.kernels.conv import causal_conv

    c, kk, out = 2 * HK * DK + HV * DV, 4, []
    w = torch.randn(c, kk, device="cuda", dtype=torch.bfloat16) * 0.5
    for n, t in ((1, 1), (32, 1), (1, 16), (32, 16)):
        x = torch.randn(n * t, c, device="cuda", dtype=torch.bfloat16)
        state = torch.randn(n + 1, c, kk - 1, device="cuda")
        rows64 = torch.arange(n, device="cuda")
        rows, fresh = rows64.int(), torch.zeros(n, dtype=torch.int32, device="cuda")

        def torch_ops():
            window = state.index_select(0, rows64) * (fresh == 0).float()[:, None, None]
            seq = torch.cat([window.to(x.dtype), x.reshape(n, t, -1).transpose(1, 2)], dim=2)
            y = F.silu(F.conv1d(seq, w[:, None, :], groups=c))
            state.index_copy_(0, rows64, seq[:, :, t:].float())
            return y.transpose(1, 2).reshape(n * t, -1).contiguous()

        saved = state.clone()
        ref = torch_ops()
        want_state = state.clone()
        state.copy_(saved)
        got = causal_conv(x, w, state, rows, fresh, t, write_state=True)
        diff = max((got.float() - ref.float()).abs().max().item(),
                   (state - want_state).abs().max().item())
        row = dict(op="conv", requests=n, rows=t, max_abs_diff=diff,
                   torch_us=1000 * graph_ms(torch_ops),
                   ours_us=1000 * graph_ms(lambda: causal_conv(x, w, state, rows, fresh, t,
                                                               write_state=True)))
        out.append(row)
        print(row, flush=True)
    return out


FUSED_CONFIGS = ((16, 1), (16, 2), (32, 1), (32, 2), (32, 4), (64, 4))


def fused_rows() -> list[dict]:
    """The --fused table (see the module docstring)."""
    from specpilot.kernels import gdn
    from specpilot.kernels.conv import causal_conv

    c, kk, out = 2 * HK * DK + HV * DV, 4, []
    w = torch.randn(c, kk, device="cuda", dtype=torch.bfloat16) * 0.5
    gate = (torch.randn(HV, device="cuda") * 0.5, torch.randn(HV, device="cuda"))
    for n in (1, 8, 32):
        x = torch.randn(n, c, device="cuda", dtype=torch.bfloat16)
        ab = torch.randn(n, 2 * HV, device="cuda", dtype=torch.bfloat16)
        a, b = ab[:, :HV], ab[:, HV:]
        conv = torch.randn(n, c, kk - 1, device="cuda").bfloat16().float()
        rec = torch.randn(n, HV, DK, DV, device="cuda") * 0.1
        rows = torch.arange(n, dtype=torch.int32, device="cuda")
        fresh = torch.zeros(n, dtype=torch.int32, device="cuda")
        ones = torch.ones(n, dtype=torch.int32, device="cuda")
        counters = torch.zeros(n * HK, dtype=torch.int32, device="cuda")
        saved = conv.clone(), rec.clone()

        def two():
            y = causal_conv(x, w, conv, rows, fresh, 1, write_state=True)
            q, k, v = y.split([HK * DK, HK * DK, HV * DV], dim=-1)
            return gdn.gated_delta_rule(q, k, v, a, b, rec, rows, fresh, rows, ones,
                                        key_heads=HK, scale=DK ** -0.5, gate=gate,
                                        out_dtype=x.dtype, **gdn.launch_config(1))

        def one(bv, nw):
            return gdn.conv_gated_delta_decode(x, w, conv, a, b, rec, rows, fresh, counters,
                                               key_heads=HK, gate=gate, scale=DK ** -0.5,
                                               block_v=bv, num_warps=nw)

        want = two()
        row = dict(op="decode", requests=n, rows=1, two_launches_us=1000 * graph_ms(two),
                   fused={})
        for bv, nw in FUSED_CONFIGS:
            conv.copy_(saved[0]), rec.copy_(saved[1])
            diff = (one(bv, nw).float() - want.float()).abs().max().item()
            row["fused"][f"{bv}x{nw}"] = dict(us=1000 * graph_ms(lambda: one(bv, nw)),
                                              max_abs_diff=diff)
        out.append(row)
        best = min(row["fused"].items(), key=lambda kv: kv[1]["us"])
        print(f"decode req {n:2}: two launches {row['two_launches_us']:6.1f} us; "
              + "  ".join(f"{k} {v['us']:5.1f} ({v['max_abs_diff']:.2g})"
                          for k, v in row["fused"].items())
              + f"  best {best[0]}", flush=True)
    return out


def graph_ms(fn, launches: int = 20, reps: int = 15) -> float:
    """Median ms of one fn() call, from CUDA-graph replays of `launches` calls."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / launches)
    return sorted(times)[len(times) // 2]


def eager_ms(fn, reps: int = 10) -> float:
    """Median ms of fn() launched eagerly (host launch cost included), CUDA events."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def fla_funcs():
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, \
            fused_recurrent_gated_delta_rule
    except ImportError as e:
        print(f"fla-core not importable ({e}); its rows are skipped", flush=True)
        return None
    return fused_recurrent_gated_delta_rule, chunk_gated_delta_rule


def bench(bw: float) -> list[dict]:
    state_bytes = HV * DK * DV * 4
    fla = fla_funcs()
    rows = []
    for n, t in ((1, 1), (8, 1), (32, 1), (1, 8), (1, 16), (8, 16), (32, 16)):
        q, k, v, g, beta = inputs(n, t)
        pool = torch.zeros(n + 1, HV, DK, DV, device="cuda")
        m = meta(n, t)
        mode = "decode" if t == 1 else "verify"
        ms = graph_ms(lambda: gated_delta_rule(q, k, v, g, beta, pool, *m, key_heads=HK,
                                               scale=DK ** -0.5, write_state=t == 1))
        moved = n * state_bytes * (2 if t == 1 else 1)
        row = dict(op=mode, requests=n, rows=t, ours_us=1000 * ms,
                   floor_us=1e6 * moved / bw, state_mib=moved / 2**20)
        if t > 1:  # the snapshot alternative writes t states per request on top of the read
            snap = torch.empty(n * t, HV, DK, DV, device="cuda")
            src = pool[:1].expand(n * t, -1, -1, -1)
            row["snapshot_extra_us"] = 1000 * graph_ms(lambda: snap.copy_(src))
            row["snapshot_mib"] = (moved + n * t * state_bytes) / 2**20
        if fla is not None:
            rec = fla[0]
            idx = torch.arange(n, device="cuda")
            shp = lambda x, h: x.reshape(n, t, h, -1)  # noqa: E731

            def run_fla():
                init = pool.index_select(0, idx)
                o, fin = rec(shp(q, HK), shp(k, HK), shp(v, HV), g.view(n, t, HV),
                             beta=beta.view(n, t, HV), scale=DK ** -0.5, initial_state=init,
                             output_final_state=t == 1, use_qk_l2norm_in_kernel=True)
                if fin is not None:
                    pool.index_copy_(0, idx, fin)
            row["fla_rec_us"] = 1000 * graph_ms(run_fla)
        rows.append(row)
        print(row, flush=True)
    # commit: all layers in one launch, a+1 = B/2 rows replayed
    for n, t in ((1, 16), (8, 16), (32, 16)):
        q, k, v, g, beta = inputs(n, t, layers=LAYERS)
        pool = torch.zeros(LAYERS, n + 1, HV, DK, DV, device="cuda")
        m = meta(n, t, lens=t // 2)
        ms = graph_ms(lambda: gated_delta_rule(None, k, v, g, beta, pool, *m, key_heads=HK),
                      launches=3, reps=9)
        moved = LAYERS * n * state_bytes * 2
        rows.append(dict(op="commit (48 layers)", requests=n, rows=t // 2, ours_us=1000 * ms,
                         floor_us=1e6 * moved / bw, state_mib=moved / 2**20))
        print(rows[-1], flush=True)
        del pool, q, k, v, g, beta
    # prefill: ours (sequential over rows) vs fla's chunked kernel
    for n, t in ((1, 512), (4, 512), (1, 4096)):
        q, k, v, g, beta = inputs(n, t)
        pool = torch.zeros(n + 1, HV, DK, DV, device="cuda")
        m = meta(n, t)
        row = dict(op="prefill", requests=n, rows=t, ours_us=1000 * graph_ms(
            lambda: gated_delta_rule(q, k, v, g, beta, pool, *m, key_heads=HK,
                                     scale=DK ** -0.5), launches=2, reps=5))
        if fla is not None:
            chunk = fla[1]
            cu = torch.arange(0, n * t + 1, t, device="cuda", dtype=torch.long)
            init = pool[:n].clone()
            cu_cpu = cu.cpu()
            row["fla_chunk_us"] = 1000 * eager_ms(lambda: chunk(  # host-side chunk indices
                q.reshape(1, n * t, HK, DK), k.reshape(1, n * t, HK, DK),
                v.reshape(1, n * t, HV, DV), g[None], beta[None], scale=DK ** -0.5,
                initial_state=init, output_final_state=True, use_qk_l2norm_in_kernel=True,
                cu_seqlens=cu, cu_seqlens_cpu=cu_cpu))
            row["ours_eager_us"] = 1000 * eager_ms(lambda: gated_delta_rule(
                q, k, v, g, beta, pool, *m, key_heads=HK, scale=DK ** -0.5))
        rows.append(row)
        print(row, flush=True)
    return rows


def copy_bandwidth() -> float:
    """Bytes/s of a 2 GiB device-to-device copy (read + write counted), as gpu_graph_check."""
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    return 2 * x.numel() / (eager_ms(lambda: y.copy_(x)) / 1000)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--sweep", action="store_true", help="only the tile / warps sweep")
    ap.add_argument("--fused", action="store_true",
                    help="only the one-launch decode conv + recurrence kernel against two launches")
    a = ap.parse_args()
    if a.sweep or a.fused:
        print(torch.cuda.get_device_name(), torch.__version__, flush=True)
        res = sweep() if a.sweep else fused_rows()
        if a.out:
            with open(a.out, "w") as f:
                json.dump(res, f, indent=2)
        return 0
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    worst = check()
    chunked_diff = check_chunked_prefill()
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    rows = bench(bw) + conv_rows(bw)
    print(f"\n{'op':20} {'req':>4} {'rows':>5} {'ours us':>9} {'floor us':>9} {'fla us':>8} "
          f"{'snap extra us':>14}")
    for r in rows:
        if r["op"] == "conv":
            print(f"{'conv (torch ops us)':20} {r['requests']:4} {r['rows']:5} {r['ours_us']:9.1f} "
                  f"{'':>9} {r['torch_us']:8.1f}   max abs diff {r['max_abs_diff']:.3g}")
            continue
        fla = r.get("fla_rec_us", r.get("fla_chunk_us"))
        print(f"{r['op']:20} {r['requests']:4} {r['rows']:5} {r['ours_us']:9.1f} "
              f"{r.get('floor_us', float('nan')):9.1f} "
              f"{fla if fla is not None else float('nan'):8.1f} "
              f"{r.get('snapshot_extra_us', float('nan')):14.1f}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(dict(check_max_abs_diff=worst, chunked_prefill_max_abs_diff=chunked_diff,
                           copy_bw=bw, rows=rows), f, indent=2)
    return 0 if worst < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
