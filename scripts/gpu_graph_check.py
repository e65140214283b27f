"""The fast path on a GPU (a script): CUDA graphs + Triton attention, checked then timed.

1. Exactness (fp32, tiny random targets + tiny DFlash, DFlash2 and DSpark drafters built here):
   greedy tokens of `ar` and `stock` with --attention-backend triton and CUDA graphs equal the
   torch reference engine's, at batch sizes that need padded graph buckets.
2. Speed (bf16, random weights at a real shape, default Muse-Glimmer-30B + its DFlash2 drafter;
   --drafter dspark: its DSpark drafter):
   `ar` decode ms/step and tokens/s for a concurrency sweep, with graphs (with and without the
   overlap scheduler, the engine's default) and, at batch 1, without them and on the torch
   reference path; the weight-read roofline (weight bytes / measured copy bandwidth) and the
   fraction of it reached; `stock` with SIMULATED acceptance
   (SGLANG_SIMULATE_ACC_LEN, default 6.5 at block 16): step ms, ratio to one `ar` step, tokens/s,
   speedup over `ar`.

    python scripts/gpu_graph_check.py [--target muse-glimmer-30b] [--drafter dflash2|dspark]
        [--batch 1,4,8,16,32]
        [--accept 6.5] [--new 32] [--prompt-len 256] [--long 8192] [--draft-graph]
        [--graph-split] [--unfused [NAMES]] [--blas cublas|cublaslt] [--ab NAME [--rounds 3]]
        [--out result.json]

--graph-split instead times, per batch, a step's wall clock against the GPU time inside its graph
replays (CUDA events around each replay): what is left is eager work and host stalls. With
--draft-graph (the server default) `stock` runs the whole greedy step as one graph
(StockStepGraphs); the speed table's `no-step ratio` column is the step ratio with separate draft
and verify graphs instead, timed in the same run, and its last column the step ratio against the
overlapped `ar` (the engine's default) instead of the plain one. The `spec-overlap` columns
time `stock` with the overlap scheduler (the default: greedy steps queued one ahead; the plain
`stock` columns run with --disable-overlap-schedule): ms per launched step,
its ratio to the overlapped `ar` step, and its tokens/s over the overlapped `ar`'s.

Hybrid targets (--target qwen38-27b) run their Gated DeltaNet layers through kernels/gdn.py,
graphed like the rest. --blas picks torch's BLAS library for the GEMMs that stay on it (verify
and drafter rows, and every GEMM with --unfused bf16_gemv): cuBLAS (torch's default) or
cuBLASLt, whose heuristics may pick other small-M kernels (an A/B, nothing else changes).
--ab NAME (a name of --unfused) times `stock` at the first batch with that fusion on and off in
the same process, the worker's graphs captured again before each timing, --rounds alternating
rounds: an A/B within the 2-4% that separate processes differ by.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import torch  # noqa: E402

from gpu_real_shapes import decode_ms_per_step  # noqa: E402
from specpilot.config import ServerArgs  # noqa: E402
from specpilot.core import SamplingParams  # noqa: E402
from specpilot.offline import OfflineEngine  # noqa: E402
from specpilot.scheduler.scheduler import Scheduler  # noqa: E402

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "specpilot", "model_configs")
# --unfused: name -> (module, switch). Gated attention's sigmoid gate in the attention kernel,
# Muse's post-norms in the next pre-norm, the Gated DeltaNet conv inside the recurrence kernel
# (DECODE), the drafter's fused GEMMs (q | kv per layer, gate_up, one context-K/V GEMM), the
# attention's q / k head norms inside the RoPE launch, our bf16 GEMV for one-row linear layers
# instead of cuBLAS; bf16_mma for the lm_head's 2-16 rows (the drafter's head and the
# verify's; on unless $SPECPILOT_BF16_MMA_HEAD is "0"); bf16_wgmma for the other layers' 2-128
# rows on sm_90 (off unless $SPECPILOT_BF16_WGMMA is "1"); markov_walk: greedy DSpark's Markov
# walk in one Triton launch per slot (kernels/markov.py) instead of torch's ~6.
FUSIONS = {"out_gate": ("specpilot.engine.triton_backend", "FUSE_OUT_GATE"),
           "pre_norm": ("specpilot.layers.norm", "FUSE_PRE_NORM"),
           "conv_decode": ("specpilot.engine.state_pool", "FUSE_CONV_DECODE"),
           "drafter": ("specpilot.spec.draft_loader", "FUSE"),
           "qk_norm_rope": ("specpilot.layers.rotary", "FUSE_QK_NORM"),
           "bf16_gemv": ("specpilot.layers.linear", "FUSE_GEMV"),
           "bf16_mma_head": ("specpilot.layers.linear", "FUSE_MMA_HEAD"),
           "bf16_wgmma": ("specpilot.layers.linear", "FUSE_WGMMA"),
           "markov_walk": ("specpilot.spec.propose", "FUSE_MARKOV")}


def exactness(draft_graph: bool = False) -> bool:
    return all([exact_one(kind, draft_graph) for kind in ("qwen3", "qwen3_5", "muse")])


def exact_one(kind: str, draft_graph: bool) -> bool:
    """kind qwen3: attention only; qwen3_5: hybrid (Gated DeltaNet through the Triton kernel,
    graphed, against the torch reference loop); muse: Muse-Glimmer (sandwich norms folded into
    one launch, the attention output gate in the attention kernel, sliding windows)."""
    from tests.e2e import tiny_muse
    from tests.e2e.tiny_drafters import make_drafter
    from tests.e2e.tiny_models import make_tiny

    tmp = tempfile.mkdtemp()
    if kind == "muse":
        target = tiny_muse.make_tiny_muse(os.path.join(tmp, "t"))
        layers = dict(hidden=tiny_muse.HIDDEN, vocab=tiny_muse.VOCAB, mask=tiny_muse.VOCAB - 1,
                      num_target_layers=tiny_muse.LAYERS, target_layers=(1, 4, 7))
    else:
        target = make_tiny(kind, os.path.join(tmp, "t"))
        layers = dict(target_layers=(1, 5), num_target_layers=8) if kind == "qwen3_5" else {}
    drafter = make_drafter("dflash", os.path.join(tmp, "d"), **layers)
    drafter2 = make_drafter("dflash2", os.path.join(tmp, "d2"), **layers)  # the selector walk
    drafter3 = make_drafter("dspark", os.path.join(tmp, "d3"), **layers)  # the Markov walk
    rng = random.Random(3)
    ps = [[rng.randrange(3, 250) for _ in range(n)] for n in (1, 7, 19, 33, 50)]
    sp = SamplingParams(temperature=0, max_new_tokens=40, ignore_eos=True)
    common = dict(model_path=target, device="cuda", dtype="float32", max_total_tokens=4096,
                  cuda_graph_max_bs=8, disable_draft_cuda_graph=not draft_graph)
    ref = [o.output_ids for o in OfflineEngine(ServerArgs(**common, attention_backend="torch"))
           .generate(ps, sp)]
    ok = True
    for name, extra in (("ar", dict(disable_overlap_schedule=True)), ("ar overlap", {}),
                        ("stock B=4", dict(speculative_draft_model_path=drafter,
                                           speculative_num_draft_tokens=4,
                                           disable_overlap_schedule=True)),
                        ("stock overlap", dict(speculative_draft_model_path=drafter,
                                               speculative_num_draft_tokens=4)),
                        ("stock dflash2", dict(speculative_draft_model_path=drafter2,
                                               speculative_num_draft_tokens=4)),
                        ("stock dspark", dict(speculative_draft_model_path=drafter3))):
        eng = OfflineEngine(ServerArgs(**common, attention_backend="triton", **extra))
        graphs = eng.runner.graphs if eng.worker is eng.runner else (
            eng.worker.step_graphs or eng.worker.verify_graphs)
        for subset in (ps, ps[:3], ps[:1]):  # 5 -> bucket 8, 3 -> 4, 1 -> 1
            outs = [o.output_ids for o in eng.generate(subset, sp)]
            same = outs == ref[:len(subset)]
            ok &= same
            print(f"exactness fp32 {kind:8} {name:10} batch {len(subset)} graphs "
                  f"{graphs is not None and graphs.captured} ({type(graphs).__name__}): "
                  f"{'PASS' if same else 'FAIL'}", flush=True)
    return ok


def copy_bandwidth() -> float:
    """Bytes/s of a large device-to-device copy (read + write counted)."""
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    t, n = time.perf_counter(), 10
    for _ in range(n):
        y.copy_(x)
    torch.cuda.synchronize()
    bw = 2 * x.numel() * n / (time.perf_counter() - t)
    del x, y
    torch.cuda.empty_cache()
    return bw


def weight_bytes(model) -> int:
    """Bytes one decode step reads: every parameter, except an untied input embedding (one row)."""
    emb = model.get_input_embeddings().weight
    head = getattr(model, "lm_head", None)
    tied = head is not None and head.weight.data_ptr() == emb.data_ptr()
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    return total if tied else total - emb.numel() * emb.element_size()


def speed(a, bw: float) -> dict:
    os.environ["SGLANG_SIMULATE_ACC_LEN"] = str(a.accept)
    base = dict(model_path=os.path.join(CONFIGS, a.target), device="cuda", dtype="bfloat16",
                load_format="dummy", context_length=a.long + 1024, max_total_tokens=
                max(a.long + 2048, max(a.batch) * (a.prompt_len + a.new + 64)),
                max_running_requests=max(a.batch), skip_tokenizer_init=True,
                cuda_graph_max_bs=max(a.batch), disable_cuda_graph=a.no_graph,
                disable_draft_cuda_graph=not a.draft_graph)
    t0 = time.perf_counter()
    eng = OfflineEngine(ServerArgs(**base, speculative_draft_load_format="dummy",
                                   disable_overlap_schedule=True,  # plain stock: eng.scheduler
                                   speculative_draft_model_path=os.path.join(
                                       CONFIGS, f"{a.target}-{a.drafter}")))
    rn = eng.runner
    if not a.no_graph:
        rn.enable_cuda_graphs(max(a.batch))  # ar's DECODE graphs on the same runner
    print(f"{a.target}: built + captured in {time.perf_counter() - t0:.1f}s, "
          f"{torch.cuda.memory_allocated() / 2**30:.1f} GiB", flush=True)
    wb = weight_bytes(rn.model)
    floor_ms = 1000 * wb / bw
    vocab = rn.info.vocab_size
    b = eng.worker.num_draft_tokens
    mk = lambda overlap=False, runner=rn: Scheduler(runner, None, max(a.batch),  # noqa: E731
                                                    8192, 65536, overlap=overlap)
    rows = []
    decode_ms_per_step(mk(), 2, 32, 4, vocab)  # warm-up: Triton JIT of the eager kernels
    decode_ms_per_step(eng.scheduler, 2, 32, 4, vocab)
    for bs in a.batch:
        # warm-up at this batch and context: eager Triton kernels specialise (and JIT-compile)
        # per split count and alignment, which must not land inside the timed steps
        decode_ms_per_step(mk(), bs, a.prompt_len, 8, vocab)
        decode_ms_per_step(eng.scheduler, bs, a.prompt_len, 8, vocab)
        ms, tps = decode_ms_per_step(mk(), bs, a.prompt_len, a.new, vocab)
        oms, otps = decode_ms_per_step(mk(overlap=True), bs, a.prompt_len, a.new, vocab)
        sms, stps = decode_ms_per_step(eng.scheduler, bs, a.prompt_len, a.new, vocab)
        row = dict(batch=bs, ctx=a.prompt_len, ar_ms=ms, ar_tps=tps, stock_ms=sms,
                   stock_tps=stps, step_ratio=sms / ms, speedup=stps / tps,
                   roofline=floor_ms / ms, ar_overlap_ms=oms, ar_overlap_tps=otps,
                   overlap_roofline=floor_ms / oms, overlap_step_ratio=sms / oms)
        if a.draft_graph:  # stock with the overlap scheduler: ms per launched step
            xms, xtps = decode_ms_per_step(mk(True, eng.worker), bs, a.prompt_len, a.new, vocab)
            row.update(stock_overlap_ms=xms, stock_overlap_tps=xtps,
                       spec_overlap_ratio=xms / oms, spec_overlap_speedup=xtps / otps)
        step_graphs = eng.worker.step_graphs
        if step_graphs is not None:  # the same steps with separate draft / verify graphs
            eng.worker.step_graphs = None
            decode_ms_per_step(eng.scheduler, bs, a.prompt_len, 8, vocab)
            nms, _ = decode_ms_per_step(eng.scheduler, bs, a.prompt_len, a.new, vocab)
            eng.worker.step_graphs = step_graphs
            row.update(stock_nostep_ms=nms, nostep_ratio=nms / ms)
        rows.append(row)
        print(rows[-1], flush=True)
    extra = {}
    if a.ab:
        extra["fusion_ab"] = fusion_ab(a, eng, mk, vocab)
    ms, tps = decode_ms_per_step(mk(), 1, a.long, 16, vocab)
    extra["ar_long_ctx"] = dict(ctx=a.long, ms=ms, tps=tps, roofline=floor_ms / ms)
    graphs = rn.graphs
    rn.graphs = None  # the same engine without graphs (eager Triton attention), batch 1
    ms, _ = decode_ms_per_step(mk(), 1, a.prompt_len, a.new, vocab)
    extra["ar_eager_triton_bs1_ms"] = ms
    from specpilot.engine.attention_backend import TorchNativeBackend

    triton_backend, rn.backend = rn.backend, TorchNativeBackend(rn.kv, rn.req_to_token)
    recurrent, rn._recurrent = rn._recurrent, None  # hybrid: the torch reference loop too
    ms, _ = decode_ms_per_step(mk(), 1, a.prompt_len, min(a.new, 8), vocab)
    extra["ar_eager_torch_bs1_ms"] = ms
    rn.backend, rn.graphs, rn._recurrent = triton_backend, graphs, recurrent
    print(extra, flush=True)
    res = dict(target=a.target, weight_bytes=wb, copy_bw=bw, floor_ms=floor_ms, verify_rows=b,
               simulated_accept_len=a.accept, rows=rows, **extra)
    del eng
    gc.collect()
    torch.cuda.empty_cache()
    return res


def fusion_ab(a, eng, mk, vocab) -> dict:
    """--ab NAME: `stock` at the first batch size with FUSIONS[NAME] on and off in one process,
    the worker's graphs captured again before each timing, --rounds alternating rounds (plain
    step and, with --draft-graph, the overlap scheduler): per-round ms and the medians."""
    module, attr = FUSIONS[a.ab]
    mod = importlib.import_module(module)
    saved, bs, times = getattr(mod, attr), a.batch[0], {}
    for r in range(a.rounds):
        for on in (True, False):
            setattr(mod, attr, on)
            eng.worker.enable_cuda_graphs(max(a.batch), draft=a.draft_graph)
            decode_ms_per_step(eng.scheduler, bs, a.prompt_len, 8, vocab)  # warm-up
            times.setdefault((on, "stock"), []).append(
                decode_ms_per_step(eng.scheduler, bs, a.prompt_len, a.new, vocab)[0])
            if a.draft_graph:
                times.setdefault((on, "spec-overlap"), []).append(decode_ms_per_step(
                    mk(True, eng.worker), bs, a.prompt_len, a.new, vocab)[0])
        print(f"ab {a.ab} bs {bs} round {r + 1}: " + ", ".join(
            f"{'on' if on else 'off'} {name} {v[-1]:.2f}" for (on, name), v in times.items())
            + " ms/step", flush=True)
    setattr(mod, attr, saved)
    eng.worker.enable_cuda_graphs(max(a.batch), draft=a.draft_graph)
    out = {f"{'on' if on else 'off'} {name}": statistics.median(v)
           for (on, name), v in times.items()}
    print(f"ab {a.ab} bs {bs} medians of {a.rounds}: " + ", ".join(
        f"{k} {v:.2f}" for k, v in out.items()) + " ms/step", flush=True)
    return dict(name=a.ab, batch=bs, rounds={f"{'on' if on else 'off'} {n}": v
                                             for (on, n), v in times.items()}, medians=out)


class GraphTimer:
    """CUDA events around every graph replay of the given _BucketGraphs objects: GPU time spent
    inside graphs, to set against a step's wall time (the rest is eager work and host stalls)."""

    def __init__(self, graphs):
        self.pairs = []
        for g in graphs:
            if g is not None:
                g._launch = self._wrap(g._launch, g.what != "drafter block")

    def _wrap(self, launch, per_step: bool):
        def timed(bs):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            out = launch(bs)
            b.record()
            self.pairs.append((a, b, per_step))
            return out
        return timed

    def take_ms(self) -> tuple[float, int]:
        """(GPU ms inside graphs, steps: replays of the one graph each step runs once)."""
        torch.cuda.synchronize()
        ms = sum(a.elapsed_time(b) for a, b, _ in self.pairs)
        steps = sum(1 for *_, once in self.pairs if once)
        self.pairs = []
        return ms, steps


def graph_split(a) -> list[dict]:
    """Per batch: step wall time against GPU time inside graph replays, `ar` and `stock`."""
    os.environ["SGLANG_SIMULATE_ACC_LEN"] = str(a.accept)
    base = dict(model_path=os.path.join(CONFIGS, a.target), device="cuda", dtype="bfloat16",
                load_format="dummy", context_length=a.prompt_len + a.new + 1024,
                max_total_tokens=max(a.batch) * (a.prompt_len + a.new + 64) + 4096,
                max_running_requests=max(a.batch), skip_tokenizer_init=True,
                cuda_graph_max_bs=max(a.batch))
    eng = OfflineEngine(ServerArgs(**base, speculative_draft_load_format="dummy",
                                   disable_overlap_schedule=True,  # one step per step() call
                                   speculative_draft_model_path=os.path.join(
                                       CONFIGS, f"{a.target}-{a.drafter}")))
    rn = eng.runner
    rn.enable_cuda_graphs(max(a.batch))
    vocab = rn.info.vocab_size
    mk = lambda: Scheduler(rn, None, max(a.batch), 8192, 65536)  # noqa: E731
    if a.profile:  # torch.profiler over the decode steps of the first batch size
        from torch.profiler import ProfilerActivity, profile

        for name, sched in (("ar", mk), ("stock", lambda: eng.scheduler)):
            decode_ms_per_step(sched(), a.batch[0], a.prompt_len, 8, vocab)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                decode_ms_per_step(sched(), a.batch[0], a.prompt_len, a.new, vocab)
            ka = prof.key_averages()
            print(f"profile {name} batch {a.batch[0]}, {a.new} new tokens per request")
            print(ka.table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=60))
            print(ka.table(sort_by="self_cuda_time_total", row_limit=40,
                           max_name_column_width=70))
    w = eng.worker
    timer = GraphTimer([rn.graphs, w.verify_graphs, w.draft_graphs, w.step_graphs])
    rows = []
    for bs in a.batch:
        for name, sched in (("ar", mk), ("stock", lambda: eng.scheduler)):
            decode_ms_per_step(sched(), bs, a.prompt_len, 8, vocab)  # warm-up
            timer.take_ms()
            ms, _ = decode_ms_per_step(sched(), bs, a.prompt_len, a.new, vocab)
            graph_ms, per_step = timer.take_ms()
            per_step = per_step or 1
            rows.append(dict(engine=name, batch=bs, wall_ms=ms,
                             in_graph_ms=graph_ms / per_step, steps=per_step))
            print(f"split {a.target} {name:5} bs {bs:2}: wall {ms:7.2f} ms/step, inside graphs "
                  f"{graph_ms / per_step:7.2f} ms/step, outside {ms - graph_ms / per_step:6.2f} "
                  f"ms/step ({per_step} steps)", flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="muse-glimmer-30b")
    ap.add_argument("--drafter", default="dflash2", choices=("dflash2", "dspark"),
                    help="the speed runs' drafter: <target>-<drafter> under "
                         "specpilot/model_configs (dspark: its README says which of its values "
                         "are assumed)")
    ap.add_argument("--batch", default="1,4,8,16,32")
    ap.add_argument("--accept", type=float, default=6.5)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--long", type=int, default=8192)
    ap.add_argument("--no-graph", action="store_true")
    ap.add_argument("--draft-graph", action="store_true",
                    help="also graph the drafter's block pass (the server default; without "
                         "it the script runs --disable-draft-cuda-graph)")
    ap.add_argument("--skip-exactness", action="store_true")
    ap.add_argument("--graph-split", action="store_true",
                    help="only: step wall time against GPU time inside graph replays")
    ap.add_argument("--profile", action="store_true",
                    help="with --graph-split: first a torch.profiler table of stock steps")
    ap.add_argument("--unfused", nargs="?", const="all", default=None,
                    help="the A side of an A/B: the named fusions off, comma-separated (no value: "
                         f"all): {', '.join(FUSIONS)}")
    ap.add_argument("--blas", choices=("cublas", "cublaslt"), default=None,
                    help="torch.backends.cuda.preferred_blas_library for the whole run "
                         "(default: torch's own choice)")
    ap.add_argument("--ab", choices=sorted(FUSIONS), default=None,
                    help="also time stock at the first batch with this fusion on and off in "
                         "this process (graphs captured again, --rounds alternating rounds)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    a.batch = [int(x) for x in a.batch.split(",")]
    if a.ab and (a.no_graph or a.graph_split):
        ap.error("--ab times captured graphs in the speed run: not with --no-graph or "
                 "--graph-split")
    if a.rounds < 1:
        ap.error("--rounds must be >= 1")
    if a.unfused:
        names = list(FUSIONS) if a.unfused == "all" else a.unfused.split(",")
        unknown = sorted(set(names) - set(FUSIONS))
        if unknown:
            ap.error(f"--unfused: unknown fusion(s) {unknown}; known: {', '.join(FUSIONS)}")
        for name in names:
            module, attr = FUSIONS[name]
            setattr(importlib.import_module(module), attr, False)
        print("unfused: " + ", ".join(f"{FUSIONS[n][0]}.{FUSIONS[n][1]}" for n in names) + " off",
              flush=True)
    if a.blas:
        torch.backends.cuda.preferred_blas_library(a.blas)
    print(torch.cuda.get_device_name(), torch.__version__,
          f"blas {torch.backends.cuda.preferred_blas_library()}", flush=True)
    if a.graph_split:
        res = graph_split(a)
        if a.out:
            with open(a.out, "w") as f:
                json.dump(res, f, indent=2)
        return 0
    ok = None if a.skip_exactness else exactness(a.draft_graph)   # None: not checked
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    res = speed(a, bw)
    res["exactness"] = ok
    print(f"\n{a.target}: weights {res['weight_bytes'] / 1e9:.1f} GB, floor "
          f"{res['floor_ms']:.2f} ms/step at {bw / 1e12:.2f} TB/s; stock B={res['verify_rows']}, "
          f"simulated acceptance {a.accept}")
    print(f"{'bs':>3} {'ar ms':>8} {'ar tok/s':>9} {'roofline':>9} {'overlap ms':>11} "
          f"{'roofline':>9} {'stock ms':>9} {'stock tok/s':>12} {'step ratio':>11} {'speedup':>8} "
          f"{'no-step ratio':>14} {'vs overlap':>11} {'spec-overlap ms':>16} {'ratio':>6} "
          f"{'speedup':>8}")
    for r in res["rows"]:
        print(f"{r['batch']:3} {r['ar_ms']:8.2f} {r['ar_tps']:9.1f} {r['roofline']:9.1%} "
              f"{r['ar_overlap_ms']:11.2f} {r['overlap_roofline']:9.1%} "
              f"{r['stock_ms']:9.2f} {r['stock_tps']:12.1f} {r['step_ratio']:11.2f} "
              f"{r['speedup']:8.2f} {r.get('nostep_ratio', float('nan')):14.2f} "
              f"{r['overlap_step_ratio']:11.2f} {r.get('stock_overlap_ms', float('nan')):16.2f} "
              f"{r.get('spec_overlap_ratio', float('nan')):6.2f} "
              f"{r.get('spec_overlap_speedup', float('nan')):8.2f}")
    lc = res["ar_long_ctx"]
    verdict = "skipped" if ok is None else "PASS" if ok else "FAIL"
    print(f"ar bs1 ctx {lc['ctx']}: {lc['ms']:.2f} ms ({lc['roofline']:.1%} of the weight floor); "
          f"bs1 eager Triton {res['ar_eager_triton_bs1_ms']:.2f} ms, eager torch "
          f"{res['ar_eager_torch_bs1_ms']:.2f} ms; exactness {verdict}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)
    return 0 if ok is not False else 1


if __name__ == "__main__":
    sys.exit(main())
