"""Real acceptance length of a trained drafter, measured with our own stock engine.

    python -m specpilot.train_drafter.evaluate --target T --drafter D --data-dir DIR \
        --split gsm8k-heldout,math500,humaneval,mbpp-test --limit 8 [--block-size B]

Per split: the first `limit` held-out prompts (prompts.eval_prompts: never trained on), chat
template applied, run greedily (stop at EOS, max_new_tokens) through the `ar` engine and the
`stock` engine (OfflineEngine with speculative_draft_model_path). Reported per split:
  tau      = sum(completion_tokens) / sum(spec_verify_ct): tokens per verify step, bonus included
  match    = prompts whose stock output equals the ar output token for token (greedy losslessness;
             on GPU in bf16 a mismatch can be a near-tie flip, on CPU fp32 there must be none)
  ar_s, stock_s = wall seconds of each engine over the split (the batch runs together)
Device: cuda when available (else cpu); dtype: the engine default (bf16 checkpoints on GPU, fp32
on CPU). Writes the table to stdout and, with --json, everything to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from specpilot.train_drafter.prompts import EVAL_SPLITS, eval_prompts, render_many


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m specpilot.train_drafter.evaluate",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--drafter", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--split", default="gsm8k-heldout",
                    help=f"comma-separated, from {', '.join(EVAL_SPLITS)}")
    ap.add_argument("--limit", type=int, default=8, help="prompts per split")
    ap.add_argument("--block-size", type=int, default=None,
                    help="verify rows incl. the anchor (default: the drafter's block_size)")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--device", default=None)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--max-running", type=int, default=None,
                    help="requests each engine runs at once (default: the engine's "
                         "--max-running-requests); the KV pool is sized for this many")
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args(argv)
    a.split = [s for s in a.split.split(",") if s]
    bad = [s for s in a.split if s not in EVAL_SPLITS]
    if bad:
        ap.error(f"unknown split(s) {bad}; known: {list(EVAL_SPLITS)}")
    for flag, path in (("--target", a.target), ("--drafter", a.drafter)):
        if not os.path.isfile(os.path.join(path, "config.json")):
            ap.error(f"{flag} {path!r} has no config.json")
    if not os.path.isdir(a.data_dir):
        ap.error(f"--data-dir {a.data_dir!r} is not a folder")
    if a.limit < 1 or a.max_new_tokens < 1 or (a.max_running is not None and a.max_running < 1):
        ap.error("--limit, --max-new-tokens and --max-running must be >= 1")
    return a


def measure(ar, stock, prompts: list[list[int]], max_new_tokens: int) -> dict:
    """Runs both engines on `prompts` (greedy); returns the split's numbers (see module doc)."""
    from specpilot.core import SamplingParams

    sp = SamplingParams(temperature=0, max_new_tokens=max_new_tokens)
    t = time.perf_counter()
    ref = ar.generate(prompts, sp)
    t_ar = time.perf_counter() - t
    t = time.perf_counter()
    outs = stock.generate(prompts, sp)
    t_st = time.perf_counter() - t
    toks = sum(o.completion_tokens for o in outs)
    steps = sum(o.meta.get("spec_verify_ct", 0) for o in outs)
    same = [o.output_ids == r.output_ids for o, r in zip(outs, ref)]
    first_diff = []
    for o, r in zip(outs, ref):
        n = next((i for i, (x, y) in enumerate(zip(o.output_ids, r.output_ids)) if x != y),
                 None if len(o.output_ids) == len(r.output_ids) else
                 min(len(o.output_ids), len(r.output_ids)))
        first_diff.append(n)
    return {"n": len(prompts), "tau": toks / max(steps, 1), "completion_tokens": toks,
            "verify_steps": steps, "match": sum(same), "ar_s": t_ar, "stock_s": t_st,
            "per_prompt_tau": [o.completion_tokens / max(o.meta.get("spec_verify_ct", 0), 1)
                               for o in outs], "first_diff": first_diff}


def main(argv=None) -> int:
    a = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    from specpilot.config import ServerArgs
    from specpilot.offline import OfflineEngine

    with open(os.path.join(a.drafter, "config.json")) as f:
        dcfg = json.load(f)
    block = a.block_size or (dcfg.get("dflash_config") or {}).get("block_size") \
        or dcfg.get("block_size", 16)
    tok = AutoTokenizer.from_pretrained(a.target)
    sets = {s: render_many(tok, [it["prompt"] for it in eval_prompts(a.data_dir, s, a.limit)])
            for s in a.split}
    longest = max(len(p) for ps in sets.values() for p in ps)
    running = a.max_running or ServerArgs.max_running_requests
    # KV pool: room for every request that runs at once at its longest (not the whole split:
    # a split of 660 prompts needed 47 GB in fp32 that way, and only `running` run together)
    n = min(running, max(len(ps) for ps in sets.values()))
    common = dict(model_path=a.target, device=a.device, dtype=a.dtype,
                  max_running_requests=running,
                  max_total_tokens=n * (longest + a.max_new_tokens + 2 * block) + 1024)
    ar = OfflineEngine(ServerArgs(**common))
    stock = OfflineEngine(ServerArgs(**common, speculative_draft_model_path=a.drafter,
                                     speculative_num_draft_tokens=block))
    stock.generate([sets[a.split[0]][0]], _warm())  # warm-up outside the timings
    ar.generate([sets[a.split[0]][0]], _warm())
    results = {}
    for s, ps in sets.items():
        results[s] = measure(ar, stock, ps, a.max_new_tokens)
        r = results[s]
        print(f"[{s}] tau {r['tau']:.3f} over {r['n']} prompts, match {r['match']}/{r['n']}",
              file=sys.stderr, flush=True)
    print(f"\ndrafter {a.drafter}  target {a.target}  block {block}  device "
          f"{ar.runner.device}  max_new_tokens {a.max_new_tokens}")
    print(f"{'split':<15}{'n':>4}{'tau':>8}{'tokens':>8}{'steps':>7}{'match':>8}"
          f"{'ar_s':>8}{'stock_s':>9}")
    for s, r in results.items():
        print(f"{s:<15}{r['n']:>4}{r['tau']:>8.3f}{r['completion_tokens']:>8}"
              f"{r['verify_steps']:>7}{r['match']:>5}/{r['n']:<2}{r['ar_s']:>8.1f}"
              f"{r['stock_s']:>9.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"target": a.target, "drafter": a.drafter, "block_size": block,
                       "device": str(ar.runner.device), "max_new_tokens": a.max_new_tokens,
                       "results": results}, f, indent=2)
    return 0


def _warm():
    from specpilot.core import SamplingParams

    return SamplingParams(temperature=0, max_new_tokens=8)


if __name__ == "__main__":
    sys.exit(main())
