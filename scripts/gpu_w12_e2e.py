"""--weight-format w12 end to end on the GPU (one script, a few minutes on an H200).

    PYTHONPATH=. python scripts/gpu_w12_e2e.py [--demo-model DIR] [--target qwen38-27b] \
        [--batch 1,4] [--out w12_e2e.json]

1. Demo model (``--demo-model``, real SmolLM2 weights, bf16, Triton attention + CUDA graphs):
   greedy output of ``ar`` with ``--weight-format w12`` against the same engine in bf16 on the
   held-out gsm8k prompts, token for token; then ``stock`` with the shipped drafter, w12 against
   bf16. The W12 GEMM's fast mode sums the same exact products as a bf16 GEMM but in another
   fp32 order than cuBLAS, so an argmax near-tie may flip: the script counts identical outputs
   and prints where the first divergence is, it does not assume identity.
   ``--reproducible`` adds the exact check: `ar` eager (no CUDA graphs, so the swapped layers
   run), every linear layer that W12 converts running either our bf16 Triton GEMM
   (``kernel.bf16_matmul``) or ``w12_matmul(reproducible=True)``, both with the untuned default
   configs (``SPECPILOT_W12_AUTOTUNE=0`` and the tuning cache of the runs before cleared): the
   two GEMMs then sum the same products in the same order, so the outputs must be identical
   token for token (``gpu_w12_repro_check.demo_check``, which also runs each engine twice).
2. Real shape (``--target``, random weights, bf16): ``ar`` decode with CUDA graphs at the given
   batches, bf16 against ``--weight-format w12`` (the weights converted on the GPU at load time,
   the same seed so both engines hold the same weights), both engines resident and timed in
   alternation (``--rounds``), with the plain and the overlapped scheduler: milliseconds per
   step side by side, the speedup of the medians and per round, and the weight bytes each step
   reads. ``--pdl 1/2,2/3`` adds both engines with programmatic dependent launch in their graphs
   at each given setting ``<pdl.MODE>/<pdl.GEMV_TRIGGER>`` (``kernels/pdl.py``; graphs captured
   again before each timing; overlapped scheduler only; rows "+pdl1/2" ...); the plain rows are
   then without PDL (without ``--pdl`` they run the engines' default: on for sm_90,
   ``$SPECPILOT_PDL``). ``--stock --accept A``: the same for ``stock`` instead of ``ar``: the
   target with its DFlash2 drafter (``<target>-dflash2``; ``--drafter dspark``: its DSpark
   drafter, ``<target>-dspark``; random weights, W12 on both with
   ``w12``), SIMULATED acceptance A (``SGLANG_SIMULATE_ACC_LEN``: random drafters accept
   nothing), the plain and the overlapped (spec-overlap) scheduler; a step's verify runs batch x
   block rows per GEMM, so this is where W12 meets the rows it is slow at (M > 16: the template
   GEMM). Tokens per second are printed beside the steps.
   Both engines at once need their weights together (Qwen3.8-27B: 51 + 39 GB, and the drafters):
   ``--one-engine`` holds one at a time, built again for each turn in the order bf16, W12,
   bf16, ... (``one_engine_schedule``), which fits an H100. ``--configs DIR --device cpu`` with
   a tiny target is a plumbing check of the script.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from gpu_real_shapes import decode_ms_per_step  # noqa: E402

from specpilot.config import DRAFT_WEIGHT_FORMATS, ServerArgs  # noqa: E402
from specpilot.core import SamplingParams  # noqa: E402
from specpilot.kernels import pdl  # noqa: E402
from specpilot.offline import OfflineEngine  # noqa: E402
from specpilot.scheduler.scheduler import Scheduler  # noqa: E402
from specpilot.settings import ASSETS_DIR  # noqa: E402
from specpilot.spec.simulate import simulated_acceptance  # noqa: E402
from specpilot.w12 import kernel as W12K  # noqa: E402

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "specpilot", "model_configs")
DATA = os.path.join(os.path.dirname(__file__), "..", "data", "evals")
FORMATS = ("auto", "w12")   # bf16 (the model's own dtype) and W12


def free():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def step_bytes(model) -> int:
    """Bytes of parameters and buffers one decode step reads (an untied input embedding: none)."""
    emb = model.get_input_embeddings().weight
    head = getattr(model, "lm_head", None)
    tied = head is not None and getattr(head, "weight", None) is not None and \
        head.weight.data_ptr() == emb.data_ptr()
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        if t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        total += t.numel() * t.element_size()
    return total if tied else total - emb.numel() * emb.element_size()


def demo_prompts(model_dir: str, n: int):
    """The held-out gsm8k half (never used for drafter training), chat-rendered."""
    from transformers import AutoTokenizer

    from specpilot.train_drafter.prompts import eval_prompts, render
    tok = AutoTokenizer.from_pretrained(model_dir)
    return [render(tok, it["prompt"]) for it in eval_prompts(DATA, "gsm8k-heldout", n)]


def demo_reproducible(a, prompts, sp) -> dict:
    """The exact check of ``gpu_w12_repro_check.demo_check``: `ar` with the W12 layers in
    reproducible mode against the same layers on our bf16 Triton GEMM, default configs on both
    sides (the tuning cache of the runs above cleared first), identical by construction."""
    from gpu_w12_repro_check import demo_check

    return demo_check(a.demo_model, len(prompts), sp.max_new_tokens, a.device)


def demo(a) -> dict:
    prompts = demo_prompts(a.demo_model, a.prompts)
    sp = SamplingParams(temperature=0, max_new_tokens=a.new, ignore_eos=True)
    common = dict(model_path=a.demo_model, device=a.device, dtype="bfloat16", max_total_tokens=16384,
                  max_running_requests=len(prompts), cuda_graph_max_bs=len(prompts))
    res = {}
    for engine, extra in (("ar", {}), ("stock", dict(speculative_draft_model_path=str(
            ASSETS_DIR / "smollm2-135m-dflash")))):
        outs = {}
        for fmt in ("auto", "w12"):
            eng = OfflineEngine(ServerArgs(**common, **extra, weight_format=fmt))
            t = time.perf_counter()
            outs[fmt] = [o.output_ids for o in eng.generate(prompts, sp)]
            print(f"demo {engine} {fmt}: {time.perf_counter() - t:.1f}s", flush=True)
            del eng
            free()
        same = sum(x == y for x, y in zip(outs["auto"], outs["w12"]))
        first = [next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), None)
                 for x, y in zip(outs["auto"], outs["w12"])]
        res[engine] = dict(identical=same, prompts=len(prompts), new_tokens=a.new,
                           first_divergence=[f for f in first if f is not None])
        print(f"demo {engine}: w12 == bf16 on {same}/{len(prompts)} prompts "
              f"(first divergences at {res[engine]['first_divergence']})", flush=True)
    if a.reproducible:
        res["reproducible"] = demo_reproducible(a, prompts, sp)
    return res


def build_format(a, fmt: str):
    """The ``--target`` engine with weight format ``fmt`` (with ``--stock`` its drafter too, the
    plain stock scheduler as ``eng.scheduler``) -> (engine, info)."""
    t0 = time.perf_counter()
    spec = dict(speculative_draft_model_path=os.path.join(a.configs, f"{a.target}-{a.drafter}"),
                speculative_draft_load_format="dummy", disable_overlap_schedule=True,
                speculative_draft_weight_format=a.draft_weight_format if fmt == "w12" else "same"
                ) if a.stock else {}
    with simulated_acceptance(a.accept if a.stock else None):
        eng = OfflineEngine(ServerArgs(
            model_path=os.path.join(a.configs, a.target), device=a.device, dtype="bfloat16",
            load_format="dummy", context_length=4096, max_total_tokens=max(a.batch) * 1024,
            max_running_requests=max(a.batch), skip_tokenizer_init=True,
            cuda_graph_max_bs=max(a.batch), weight_format=fmt, random_seed=0, **spec))
    rn = eng.runner
    info = dict(build_s=time.perf_counter() - t0, step_bytes=step_bytes(rn.model))
    if torch.cuda.is_available():
        info["gib"] = torch.cuda.memory_allocated() / 2**30
    if fmt == "w12":
        info.update(converted=rn.w12_report["converted"], kept=rn.w12_report["kept"])
    if a.stock:
        info["draft_weight_format"] = spec["speculative_draft_weight_format"]
    print(f"{a.target} {fmt}: {info}", flush=True)
    return eng, info


def step_ms(a, eng, bs: int, overlap: bool, new: int | None = None) -> tuple:
    """(ms per step, tokens per second) of ``ar`` (with ``--stock``: ``stock``) at batch ``bs``:
    a fresh scheduler, plain or overlapped (stock: the engine's plain one, or a fresh overlapped
    one on its worker)."""
    rn = eng.runner
    if a.stock and not overlap:
        sched = eng.scheduler
    else:
        sched = Scheduler(eng.worker if a.stock else rn, None, max(a.batch), 8192, 65536,
                          overlap=overlap)
    return decode_ms_per_step(sched, bs, a.prompt_len, new or a.new, rn.info.vocab_size)


def tuned_configs() -> dict:
    """The GEMM / GEMV configs tuned in this process so far (W12 layers and the bf16 GEMV of
    bf16 models): {tune key: GemvConfig.short or the GemmConfig's fields}."""
    return {k: getattr(c, "short", None) or str(tuple(vars(c).values()))
            for k, c in W12K._TUNED.items()}


def median(v: list) -> float:
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def one_engine_schedule(rounds: int) -> list:
    """``--one-engine``: the builds in order, each with the rounds it times: bf16, W12, bf16, ...,
    every build after the first timing two rounds (for 2 rounds: bf16 [0], W12 [0, 1], bf16 [1],
    an A-B-B-A order), so a drift of the machine that is linear in time cancels in the medians;
    rounds + 1 builds."""
    done, order = {f: 0 for f in FORMATS}, []
    while min(done.values()) < rounds:
        fmt = FORMATS[len(order) % 2]
        n = 1 if not order else 2
        rs = list(range(done[fmt], min(rounds, done[fmt] + n)))
        done[fmt] += len(rs)
        order.append((fmt, rs))
    return order


def time_rounds(a, eng, fmt: str, bs: int, rounds: list, warm: bool, scheds: list,
                settings: dict, times: dict, tps: dict) -> None:
    """Time ``eng`` (format ``fmt``) at batch ``bs`` for each of ``rounds`` and each setting
    (PDL) and scheduler, into ``times`` / ``tps`` [(bs, fmt + tag, scheduler)][round]; a warm-up
    first (JIT, the GEMV / W12 tuning, graphs) before the first round if ``warm``, and before
    every setting whose graphs are captured again."""
    for r in rounds:
        for tag, setting in settings.items():
            if len(settings) > 1:
                pdl.ENABLED = setting is not None
                pdl.MODE, trigger = setting or (1, 2)
                pdl.GEMV_TRIGGER.update(w12=trigger, bf16=trigger)
                eng.runner.enable_cuda_graphs(max(a.batch))
            if len(settings) > 1 or (warm and r == rounds[0]):
                for _, ov in scheds:
                    step_ms(a, eng, bs, ov, new=8)
            for name, ov in scheds:
                ms, tok_s = step_ms(a, eng, bs, ov)
                times.setdefault((bs, fmt + tag, name), {})[r] = ms
                tps.setdefault((bs, fmt + tag, name), {})[r] = tok_s


def real_shape(a) -> dict:
    """bf16 against W12 on the same random weights, in alternation: --rounds rounds of each
    format with the plain and the overlapped scheduler (the engine's default), so that a drift
    of the machine during the run falls on both formats alike. Both engines resident at once
    (each round times bf16 then W12), or with ``--one-engine`` one at a time, built again for
    each turn (``one_engine_schedule``), for GPUs that cannot hold both."""
    info, times, tps = {}, {}, {}
    scheds = [("plain", False), ("overlap", True)]
    engine = "stock" if a.stock else "ar"
    settings = {"": None}   # PDL off, or (pdl.MODE, pdl.GEMV_TRIGGER)
    if a.pdl:   # the same engines, graphs captured again with PDL on
        settings.update({f"+pdl{m}/{g}": (m, g) for m, g in a.pdl})
        scheds = [("overlap", True)]
    saved = (pdl.ENABLED, pdl.MODE, dict(pdl.GEMV_TRIGGER))   # the engines' setting

    def progress(bs, r):
        print(f"  bs {bs} round {r + 1}: " + ", ".join(
            f"{key} {name} {v[r]:.2f}" for (b, key, name), v in times.items()
            if b == bs and r in v) + " ms/step", flush=True)

    if a.one_engine:
        for fmt, rounds in one_engine_schedule(a.rounds):
            eng, info[fmt] = build_format(a, fmt)
            if a.stock:
                info["verify_rows"] = eng.worker.num_draft_tokens
            for bs in a.batch:
                time_rounds(a, eng, fmt, bs, rounds, True, scheds, settings, times, tps)
                for r in rounds:
                    progress(bs, r)
            info[fmt]["tuned"] = tuned_configs()
            del eng
            free()
            if torch.cuda.is_available():
                print(f"  freed: {torch.cuda.memory_allocated() / 2**30:.2f} GiB still "
                      "allocated", flush=True)
    else:
        engines = {}
        # W12 first: its build holds the whole bf16 model while converting it to W12, and
        # beside a resident bf16 engine Muse-Glimmer-30B's ran out of memory (session 39)
        for fmt in sorted(FORMATS, key=lambda f: f != "w12"):
            engines[fmt], info[fmt] = build_format(a, fmt)
        if a.stock:
            info["verify_rows"] = engines["w12"].worker.num_draft_tokens
        for bs in a.batch:
            for r in range(a.rounds):
                for fmt in FORMATS:
                    time_rounds(a, engines[fmt], fmt, bs, [r], r == 0, scheds, settings,
                                times, tps)
                progress(bs, r)
        for fmt in FORMATS:
            info[fmt]["tuned"] = tuned_configs()
        del engines
        free()
    pdl.ENABLED, pdl.MODE, trigger = saved
    pdl.GEMV_TRIGGER.update(trigger)
    if a.stock:
        info["simulated_accept_len"] = a.accept
    rows = {}
    for bs in a.batch:
        row = {}
        for tag in settings:
            for name, _ in scheds:
                b, w = (sorted_rounds(times[(bs, f + tag, name)]) for f in FORMATS)
                bt, wt = (sorted_rounds(tps[(bs, f + tag, name)]) for f in FORMATS)
                per_round = [x / y for x, y in zip(b, w)]
                row[name + tag] = dict(bf16_ms=b, w12_ms=w, bf16_median_ms=median(b),
                                       w12_median_ms=median(w), speedup=median(b) / median(w),
                                       speedup_per_round=per_round, bf16_tok_s=bt, w12_tok_s=wt)
                print(f"{a.target} {engine} bs {bs} {name}{tag}: bf16 {median(b):.2f} ms, w12 "
                      f"{median(w):.2f} ms (medians of {a.rounds}), w12 speedup "
                      f"{median(b) / median(w):.3f}x (per round "
                      f"{', '.join(f'{x:.3f}' for x in per_round)}); tokens/s bf16 "
                      f"{median(bt):.1f}, w12 {median(wt):.1f}", flush=True)
        for tag in list(settings)[1:]:
            for fmt in FORMATS:
                off = median(list(times[(bs, fmt, "overlap")].values()))
                on = median(list(times[(bs, fmt + tag, "overlap")].values()))
                row[f"gain_{fmt}{tag}"] = off / on
                print(f"{a.target} {engine} bs {bs} {fmt}: {tag[1:]}: {off:.2f} -> "
                      f"{on:.2f} ms ({off / on:.3f}x)", flush=True)
        rows[bs] = row
    print(f"  tuned configs: {info['w12']['tuned']}", flush=True)
    return dict(target=a.target, engine=engine, prompt_len=a.prompt_len, new=a.new,
                rounds=a.rounds, one_engine=a.one_engine, info=info, rows=rows)


def sorted_rounds(by_round: dict) -> list:
    """{round: value} -> the values in round order."""
    return [by_round[r] for r in sorted(by_round)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--demo-model", default=None)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--target", default="qwen38-27b", help="model_configs name ('' to skip)")
    ap.add_argument("--batch", default="1,4")
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating timing rounds per format and scheduler (medians reported)")
    ap.add_argument("--reproducible", action="store_true",
                    help="demo: also the exact check against our bf16 Triton GEMM (module doc)")
    ap.add_argument("--device", default="cuda", help="cpu: a plumbing check only (reference path)")
    ap.add_argument("--pdl", default="",
                    help="also time both engines with programmatic dependent launch at these "
                         "settings, comma-separated '<pdl.MODE>/<pdl.GEMV_TRIGGER>' (e.g. "
                         "'1/2,2/3'; kernels/pdl.py), graphs captured again before each timing; "
                         "overlapped scheduler only")
    ap.add_argument("--stock", action="store_true",
                    help="real shape: time stock (the target with its drafter, --drafter, random "
                         "weights) instead of ar; needs --accept")
    ap.add_argument("--accept", type=float, default=None,
                    help="--stock: the SIMULATED acceptance length per step (issue 5: 4.8 for "
                         "qwen38-27b at block 8, 6.5 for muse-glimmer-30b at block 16)")
    ap.add_argument("--drafter", default="dflash2", choices=("dflash2", "dspark"),
                    help="--stock: the drafter, <target>-<drafter> under --configs (dspark: "
                         "specpilot/model_configs/README.md says which of its keys are known)")
    ap.add_argument("--draft-weight-format", default="same", choices=DRAFT_WEIGHT_FORMATS,
                    help="--stock: the W12 engine's drafter (--speculative-draft-weight-format; "
                         "the bf16 engine's stays bf16)")
    ap.add_argument("--one-engine", action="store_true",
                    help="real shape: hold one engine at a time, built again for each turn "
                         "(bf16, W12, bf16, ...: one_engine_schedule), for a GPU that cannot hold "
                         "both (Qwen3.8-27B `stock`: ~54 + ~41 GiB; an H100 has ~78)")
    ap.add_argument("--configs", default=CONFIGS,
                    help="the folder of --target's config (with --stock also "
                         "<target>-<drafter>)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.stock and (a.accept is None or a.accept < 1):
        ap.error("--stock needs --accept >= 1 (the simulated acceptance length per step)")
    if a.stock and a.pdl:
        ap.error("--pdl times ar only")
    a.batch = [int(b) for b in a.batch.split(",")]
    try:
        a.pdl = [tuple(int(v) for v in t.split("/")) for t in a.pdl.split(",") if t]
    except ValueError:
        ap.error(f"--pdl: comma-separated <mode>/<trigger> pairs, got {a.pdl!r}")
    if any(len(t) != 2 or t[0] not in (1, 2) or t[1] not in (1, 2, 3) for t in a.pdl):
        ap.error("--pdl: mode 1 or 2, GEMV trigger 1, 2 or 3")
    if a.pdl and a.device != "cuda":
        ap.error("--pdl needs --device cuda")
    res = {}
    if a.demo_model:
        res["demo"] = demo(a)
    if a.target:
        res["real_shape"] = real_shape(a)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
