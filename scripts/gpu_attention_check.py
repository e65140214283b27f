"""GPU check of the Triton paged attention (a script; H200, about 2-3 minutes).

1. Correctness, bf16 kernels against the torch reference run in fp32 on the same (upcast) data:
   target attention (TritonBackend vs TorchNativeBackend) for Qwen3.8-27B (24 q / 4 kv heads,
   head dim 256), Muse-Glimmer-30B (32 / 2 / 128, window 2048) and the SmolLM2 demo (9 / 3 / 64)
   at batch 1/8/32, contexts 128/2k/8k, ext 1/8/16, window off/on; tree bitmasks against a
   dense-mask SDPA; the drafter block pass (TritonDraftAttentionBackend vs DraftAttentionBackend)
   at the DFlash2 drafters' shapes; decode_attention with padding requests.
2. Timing (median, L2 flushed between runs by triton.testing.do_bench): decode and verify at
   batch 1/8/32 x context 2k/8k: torch backend (eager), Triton backend (eager, i.e. with launch
   overhead) and the attention kernels replayed from a CUDA graph (device time), against the
   KV-read floor (bytes of K and V read / 3.3 TB/s, and / the measured copy bandwidth). A small
   sweep of tile configs and split counts for tuning.
3. CUDA-graph safety: decode_attention captured once, replayed after rewriting seq_lens (with
   padding requests), equal to eager on the new lengths.

    python scripts/gpu_attention_check.py [--out attention_check.json] [--quick]
    python scripts/gpu_attention_check.py --smoke   # tiny shapes, correctness only (CPU: interpreter)

On the CPU interpreter --smoke runs fp16: triton's interpreter multiplies bf16 tl.dot operands as
raw bits (seen with triton 3.9), compiled kernels are unaffected.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import torch

if "--smoke" in sys.argv and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import triton  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from specpilot.engine.attention_backend import TorchNativeBackend  # noqa: E402
from specpilot.engine.kv_cache import KVCache, ReqToTokenTable  # noqa: E402
from specpilot.engine.triton_backend import TritonBackend, TritonDraftAttentionBackend  # noqa: E402
from specpilot.kernels import attention as ka  # noqa: E402
from specpilot.spec.draft_attention import DraftAttentionBackend  # noqa: E402

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "specpilot", "model_configs")
HBM_BYTES_PER_S = 3.3e12  # the floor's bandwidth; the measured copy bandwidth is printed beside it
BF16_TOL = 1e-2  # relative error budget for bf16 operands (METHOD.md: 1e-3 .. 1e-2)


def model_shape(name: str) -> tuple[int, int, int, int | None]:
    """(q heads, kv heads, head dim, sliding window) of a folder under specpilot/model_configs."""
    with open(os.path.join(CONFIGS, name, "config.json")) as f:
        c = json.load(f)
    c = c.get("text_config", c)
    return (c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"],
            c.get("sliding_window"))


class Case:
    """Random requests in a paged KV cache on `dev`: request b has prefix_lens[b] cached
    positions and ext new rows, in a shuffled table row over shuffled slots (loc = the new rows'
    slots, entered in the table as the runner does)."""

    def __init__(self, hq, hkv, d, prefix_lens, ext, dev, seed, dtype=torch.bfloat16):
        g = torch.Generator(device=dev).manual_seed(seed)
        self.hq, self.hkv, self.d, self.dev = hq, hkv, d, dev
        self.prefix_lens, self.ext = list(prefix_lens), ext
        self.batch = len(prefix_lens)
        kv_lens = [p + ext for p in prefix_lens]
        total = sum(kv_lens)
        self.kv = KVCache(1, total + 1, hkv, d, dtype, dev)
        for buf in (self.kv.k[0], self.kv.v[0]):
            buf.copy_(torch.randn(buf.shape, generator=g, device=dev))
        self.table = ReqToTokenTable(self.batch + 2, max(kv_lens) + 1, dev)
        self.rows = [r + 1 for r in random.Random(seed).sample(range(self.batch + 1), self.batch)]
        slots = torch.randperm(total, generator=g, device=dev) + 1  # slot 0 is scratch
        loc, off = [], 0
        for row, p, n in zip(self.rows, prefix_lens, kv_lens):
            self.table.table[row, :n] = slots[off:off + n]
            loc.append(slots[off + p:off + n])
            off += n
        self.loc = torch.cat(loc)
        t = self.batch * ext
        self.q, self.k, self.v = (torch.randn((t, h, d), generator=g, device=dev).to(dtype)
                                  for h in (hq, hkv, hkv))
        self.scale = d ** -0.5

    def upcast(self) -> "Case":
        """The same data in fp32 (a shallow copy with its own fp32 KV cache)."""
        c = object.__new__(Case)
        c.__dict__.update(self.__dict__)
        c.kv = KVCache(1, self.kv.num_slots, self.hkv, self.d, torch.float32, self.dev)
        c.kv.k[0].copy_(self.kv.k[0])
        c.kv.v[0].copy_(self.kv.v[0])
        c.q, c.k, c.v = self.q.float(), self.k.float(), self.v.float()
        return c

    def target(self, cls, **prepare_kw):
        backend = cls(self.kv, self.table)
        backend.prepare(self.rows, self.prefix_lens, [self.ext] * self.batch, self.loc,
                        **prepare_kw)
        return backend

    def draft(self, cls):
        return cls(self.kv, self.table).prepare_block(self.rows, self.prefix_lens, self.ext)


def rel_err(out, ref) -> float:
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    return err if out.isfinite().all() else float("inf")


def random_tree(ext: int, rng: random.Random):
    """Ancestor-or-self mask [ext, ext] and depths of a random tree (parents before children)."""
    allowed = torch.zeros(ext, ext, dtype=torch.bool)
    depth = torch.zeros(ext, dtype=torch.int64)
    for i in range(1, ext):
        parent = rng.randrange(i)
        allowed[i] = allowed[parent]
        depth[i] = depth[parent] + 1
    allowed |= torch.eye(ext, dtype=torch.bool)
    return allowed, depth


def tree_reference(c: "Case", allowed, positions, window):
    """fp32 SDPA per request with the explicit mask the tree kernel implements."""
    c.kv.store(0, c.loc, c.k, c.v)
    out, e = torch.empty_like(c.q), c.ext
    for b, (row, p) in enumerate(zip(c.rows, c.prefix_lens)):
        slots = c.table.table[row, :p + e]
        rows = slice(b * e, (b + 1) * e)
        mask = torch.zeros(e, p + e, dtype=torch.bool, device=c.dev)
        mask[:, :p] = True
        if window is not None:
            keys = torch.arange(p, device=c.dev)
            mask[:, :p] &= positions[rows, None] - keys[None, :] < window
        mask[:, p:] = allowed[rows]
        o = F.scaled_dot_product_attention(
            c.q[rows].transpose(0, 1), c.kv.k[0][slots].transpose(0, 1),
            c.kv.v[0][slots].transpose(0, 1), attn_mask=mask, scale=c.scale, enable_gqa=True)
        out[rows] = o.transpose(0, 1)
    return out


def prefixes(batch: int, ctx: int, ext: int, rng: random.Random) -> list[int]:
    """Context lengths up to ctx (one request exactly ctx - ext, the rest in [ctx/2, ctx])."""
    top = max(ctx - ext, 0)
    return [top] + [rng.randint(top // 2, top) for _ in range(batch - 1)]


def windowed(model_window: int | None, ctx: int) -> int:
    """The model's sliding window where it is shorter than the context, else one that is."""
    return model_window if model_window and model_window < ctx else ctx // 2 + 3


def correctness(dev, quick: bool, smoke: bool) -> list[dict]:
    rows, rng, seed = [], random.Random(0), 0
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float16
    demo = (9, 3, 64, None)
    qwen, muse = model_shape("qwen38-27b"), model_shape("muse-glimmer-30b")
    drafters = {n: model_shape(n) for n in ("qwen38-27b-dflash2", "muse-glimmer-30b-dflash2")}
    if smoke:
        targets = {"demo": demo, "small": (4, 2, 64, None)}
        batches, contexts, exts = (1, 3), (5, 70), (1, 8)
        drafters = {"small-draft": (4, 2, 64, None)}
    else:
        targets = {"qwen38-27b": qwen, "muse-glimmer-30b": muse, "demo": demo}
        batches = (1, 8) if quick else (1, 8, 32)
        contexts = (128, 2048) if quick else (128, 2048, 8192)
        exts = (1, 8, 16)

    def record(kind, model, batch, ctx, ext, window, err, extra=""):
        rows.append(dict(kind=kind, model=model, batch=batch, ctx=ctx, ext=ext, window=window,
                         rel_err=err, ok=err < BF16_TOL, note=extra))

    for model, (hq, hkv, d, model_window) in targets.items():
        for batch in batches:
            for ctx in contexts:
                window = windowed(model_window, ctx)
                for ext in exts:
                    seed += 1
                    c = Case(hq, hkv, d, prefixes(batch, ctx, ext, rng), ext, dev, seed, dtype)
                    ref32 = c.upcast()
                    for win in (None, window):
                        ref = ref32.target(TorchNativeBackend).forward(
                            ref32.q, ref32.k, ref32.v, 0, c.scale, win)
                        out = c.target(TritonBackend).forward(c.q, c.k, c.v, 0, c.scale, win)
                        record("extend" if ext > 1 else "decode", model, batch, ctx, ext, win,
                               rel_err(out, ref))
                # tree verify (random trees, positions = prefix + depth), one ext per context
                seed += 1
                ext = exts[-1]
                c = Case(hq, hkv, d, prefixes(batch, ctx, ext, rng), ext, dev, seed, dtype)
                trees = [random_tree(ext, rng) for _ in range(batch)]
                allowed = torch.cat([a for a, _ in trees]).to(dev)
                positions = torch.cat([p + dep for p, (_, dep) in zip(c.prefix_lens, trees)]).to(dev)
                words = ka.tree_mask_words(allowed)
                ref32 = c.upcast()
                for win in (None, window):
                    ref = tree_reference(ref32, allowed, positions, win)
                    out = c.target(TritonBackend, tree_mask=words, tree_positions=positions).forward(
                        c.q, c.k, c.v, 0, c.scale, win)
                    record("tree", model, batch, ctx, ext, win, rel_err(out, ref))
        # decode_attention (all keys through the table) with padding requests (seq_len 0)
        seed += 1
        c = Case(hq, hkv, d, prefixes(4, contexts[-1], 1, rng), 1, dev, seed, dtype)
        ref32 = c.upcast()
        ref = ref32.target(TorchNativeBackend).forward(ref32.q, ref32.k, ref32.v, 0, c.scale)
        c.kv.store(0, c.loc, c.k, c.v)
        seq = [p + 1 for p in c.prefix_lens]
        pad_q = torch.cat([c.q, torch.randn_like(c.q[:2])])
        out = ka.decode_attention(
            pad_q, c.kv.k[0], c.kv.v[0], c.table.table,
            torch.tensor(c.rows + [0, 0], dtype=torch.int32, device=dev),
            torch.tensor(seq + [0, 0], dtype=torch.int32, device=dev), scale=c.scale)
        pad_ok = bool((out[-2:] == 0).all())
        record("decode_api", model, 4, contexts[-1], 1, None,
               rel_err(out[:-2], ref) if pad_ok else float("inf"), "padding rows zero" if pad_ok
               else "PADDING ROWS NOT ZERO")
    # drafter block pass: Bd = 16 rows at positions s.., context from the draft KV
    for model, (hq, hkv, d, model_window) in drafters.items():
        for batch in batches:
            for ctx in contexts:
                seed += 1
                bd = 16 if not smoke else 4
                c = Case(hq, hkv, d, prefixes(batch, ctx, 0, rng), bd, dev, seed, dtype)
                ref32 = c.upcast()
                for causal in (False, True):
                    for win in (None, windowed(model_window, ctx)):
                        ref = ref32.draft(DraftAttentionBackend).attend(
                            ref32.q, ref32.k, ref32.v, 0, c.scale, causal, win)
                        out = c.draft(TritonDraftAttentionBackend).attend(
                            c.q, c.k, c.v, 0, c.scale, causal, win)
                        record("draft", model, batch, ctx, bd, win, rel_err(out, ref),
                               "causal" if causal else "non-causal")
    return rows


def copy_bandwidth() -> float:
    """Achievable device bandwidth in bytes/s: a 2 GiB device-to-device copy (read + write)."""
    x = torch.empty(1 << 30, dtype=torch.bfloat16, device="cuda").uniform_()
    y = torch.empty_like(x)
    ms = triton.testing.do_bench(lambda: y.copy_(x), warmup=50, rep=300, return_mode="median")
    return 2 * x.numel() * x.element_size() / (ms * 1e-3)


def graph_of(fn) -> torch.cuda.CUDAGraph:
    """fn captured in a CUDA graph (after a warm-up run on a side stream, as torch requires)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def bench_ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def kernel_call(c: Case, config=None, num_splits=None):
    """The attention launches of TritonBackend.forward without the K/V store (new rows are read
    densely, prefix keys through the table)."""
    meta = torch.tensor([c.rows, [p + c.ext for p in c.prefix_lens]], dtype=torch.int32,
                        device=c.dev)
    max_keys = max(c.prefix_lens) + c.ext
    return lambda: ka.paged_attention(
        c.q, c.kv.k[0], c.kv.v[0], c.table.table, meta[0], meta[1], scale=c.scale, ext=c.ext,
        k_new=c.k, v_new=c.v, max_keys=max_keys, num_splits=num_splits, config=config)


def timing(copy_bw: float, quick: bool) -> list[dict]:
    hq, hkv, d, _ = model_shape("qwen38-27b")
    demo = (9, 3, 64)
    rows, seed = [], 100
    for model, (mq, mkv, md) in (("qwen38-27b", (hq, hkv, d)), ("demo", demo)):
        for ext in (1, 8, 16):
            for batch in ((1, 8) if quick else (1, 8, 32)):
                for ctx in (2048, 8192):
                    seed += 1
                    c = Case(mq, mkv, md, [ctx - ext] * batch, ext, "cuda", seed)
                    torch_b, triton_b = c.target(TorchNativeBackend), c.target(TritonBackend)
                    t_torch = bench_ms(lambda: torch_b.forward(c.q, c.k, c.v, 0, c.scale))
                    t_triton = bench_ms(lambda: triton_b.forward(c.q, c.k, c.v, 0, c.scale))
                    t_graph = bench_ms(graph_of(kernel_call(c)).replay)
                    kv_bytes = 2 * batch * ctx * mkv * md * c.kv.k[0].element_size()
                    rows.append(dict(
                        op="decode" if ext == 1 else f"verify{ext}", model=model, batch=batch,
                        ctx=ctx, torch_ms=t_torch, triton_ms=t_triton, graph_us=1e3 * t_graph,
                        floor_us=1e6 * kv_bytes / HBM_BYTES_PER_S,
                        floor_measured_us=1e6 * kv_bytes / copy_bw))
    return rows


def tuning(quick: bool) -> list[dict]:
    """Graph-replay time of the Qwen decode / verify kernels per tile config and split count."""
    hq, hkv, d, _ = model_shape("qwen38-27b")
    sweep = ((32, 4, 2), (32, 4, 3), (64, 4, 2), (64, 8, 3), (16, 4, 4))  # block_n, warps, stages
    out = []
    # (1, 256, *): the cost model's context, where a layer's decode attention took 21 us in the
    # engine (run 16) for 1 MB of K/V; under graphs the engine splits by the table width (32)
    cases = [(1, 256, 1), (1, 256, 8), (1, 8192, 1), (32, 8192, 1), (8, 8192, 16)]
    cases = cases if not quick else cases[:3]
    for batch, ctx, ext in cases:
        c = Case(hq, hkv, d, [ctx - ext] * batch, ext, "cuda", 7)
        default = ka.default_config(ext * hq // hkv, d)
        for block_n, warps, stages in sweep:
            cfg = ka.KernelConfig(default.block_m, block_n, warps, stages)
            us = 1e3 * bench_ms(graph_of(kernel_call(c, config=cfg)).replay)
            out.append(dict(batch=batch, ctx=ctx, ext=ext, config=str(cfg), splits="auto",
                            graph_us=us, default=cfg == default))
        for splits in (1, 8, 16, 32, 64):
            us = 1e3 * bench_ms(graph_of(kernel_call(c, num_splits=splits)).replay)
            out.append(dict(batch=batch, ctx=ctx, ext=ext, config="default", splits=splits,
                            graph_us=us, default=False))
    return out


def graph_safety() -> dict:
    """Capture decode_attention once; rewrite seq_lens / req_rows in place (longer, shorter,
    padding); replay; compare with eager on the same inputs."""
    hq, hkv, d, _ = model_shape("qwen38-27b")
    batch, width = 8, 8192
    c = Case(hq, hkv, d, [width - 1] * batch, 1, "cuda", 3)
    c.kv.store(0, c.loc, c.k, c.v)
    rows = torch.tensor(c.rows, dtype=torch.int32, device="cuda")
    seq = torch.full((batch,), width, dtype=torch.int32, device="cuda")
    q = c.q.clone()
    out = {}

    def step():
        out["o"] = ka.decode_attention(q, c.kv.k[0], c.kv.v[0], c.table.table, rows, seq,
                                       scale=c.scale)

    graph = graph_of(step)
    results = []
    for lens in ([width] * batch, [1, 0, 5000, 63, 8191, 0, 2048, 300], [0] * batch,
                 [4097] * batch):
        seq.copy_(torch.tensor(lens, dtype=torch.int32))
        q.copy_(torch.randn_like(q))
        graph.replay()
        replayed = out["o"].clone()
        eager = ka.decode_attention(q, c.kv.k[0], c.kv.v[0], c.table.table, rows, seq,
                                    scale=c.scale)
        pad = [i for i, n in enumerate(lens) if n == 0]
        results.append(dict(seq_lens=lens, max_abs_diff=(replayed - eager).abs().max().item(),
                            padding_zero=bool((replayed[pad] == 0).all()) if pad else True))
    ok = all(r["max_abs_diff"] == 0 and r["padding_zero"] for r in results)
    return dict(ok=ok, replays=results)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write all numbers to this JSON file")
    ap.add_argument("--quick", action="store_true", help="fewer shapes (batch 1/8, ctx <= 2k)")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, correctness only")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type != "cuda" and not args.smoke:
        print("needs a CUDA GPU (or --smoke)")
        return 2
    report = dict(torch=torch.__version__, triton=triton.__version__,
                  device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu")
    t0 = time.time()
    with torch.inference_mode():
        report["correctness"] = correctness(dev, args.quick, args.smoke)
    bad = [r for r in report["correctness"] if not r["ok"]]
    worst: dict = {}
    for r in report["correctness"]:
        key = (r["kind"], r["model"])
        worst[key] = max(worst.get(key, 0.0), r["rel_err"])
    print(f"== correctness: {len(report['correctness']) - len(bad)}/{len(report['correctness'])}"
          f" cases within rel err {BF16_TOL} ({time.time() - t0:.0f}s)")
    for (kind, model), err in sorted(worst.items()):
        print(f"  {kind:<11}{model:<26}max rel err {err:.2e}")
    for r in bad:
        print("  FAIL", {k: r[k] for k in ("kind", "model", "batch", "ctx", "ext", "window",
                                          "rel_err", "note")})
    if not args.smoke:
        with torch.inference_mode():
            t1 = time.time()
            report["copy_bandwidth_TBps"] = copy_bandwidth() / 1e12
            print(f"== copy bandwidth (2 GiB d2d, read + write): "
                  f"{report['copy_bandwidth_TBps']:.2f} TB/s")
            report["timing"] = timing(report["copy_bandwidth_TBps"] * 1e12, args.quick)
            print("== timing (median; graph = attention kernels replayed from a CUDA graph; "
                  "floor = K+V bytes / 3.3 TB/s | / measured copy bw)")
            print(f"  {'op':<9}{'model':<12}{'B':>3}{'ctx':>6}{'torch ms':>10}{'triton ms':>10}"
                  f"{'graph us':>10}{'floor us':>10}{'meas us':>9}{'floor/graph':>12}")
            for r in report["timing"]:
                print(f"  {r['op']:<9}{r['model']:<12}{r['batch']:>3}{r['ctx']:>6}"
                      f"{r['torch_ms']:>10.3f}{r['triton_ms']:>10.3f}{r['graph_us']:>10.1f}"
                      f"{r['floor_us']:>10.1f}{r['floor_measured_us']:>9.1f}"
                      f"{r['floor_us'] / r['graph_us']:>11.0%}")
            report["tuning"] = tuning(args.quick)
            print("== tuning (Qwen, graph us; * = default config)")
            for r in report["tuning"]:
                mark = "*" if r["default"] else " "
                print(f"  B{r['batch']:<3}ctx {r['ctx']:<5} ext {r['ext']:<3}{mark}"
                      f"{r['config']:<60} splits {r['splits']!s:<5}{r['graph_us']:>9.1f}")
            report["graph"] = graph_safety()
            print(f"== CUDA graph replay with rewritten seq_lens: "
                  f"{'ok' if report['graph']['ok'] else 'MISMATCH'} "
                  f"{[(r['max_abs_diff'], r['padding_zero']) for r in report['graph']['replays']]}")
            print(f"   ({time.time() - t1:.0f}s)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return 1 if bad or not report.get("graph", {"ok": True})["ok"] else 0


if __name__ == "__main__":
    sys.exit(main())
