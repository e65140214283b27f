"""Demo model speed with its shipped drafter (a script): `ar` and `stock` tokens/s at one request
and at 8, REAL acceptance (specpilot/assets/smollm2-135m-dflash, greedy, held-out gsm8k prompts),
with whatever fast path the engine picks on this device (on CUDA: Triton attention + CUDA graphs).
Each rate is the median of --repeat timed runs, `ar` and `stock` taking turns (one run of 8
requests lasts about 0.1 s on an H200, so single runs moved by 20% between calls).

    python scripts/gpu_demo_speed.py [--model <demo folder>] [--n 8] [--new 128] [--repeat 5]
        [--disable-overlap-schedule]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from specpilot.config import ServerArgs  # noqa: E402
from specpilot.core import SamplingParams  # noqa: E402
from specpilot.offline import OfflineEngine  # noqa: E402
from specpilot.settings import ASSETS_DIR  # noqa: E402
from specpilot.train_drafter.prompts import eval_prompts, render  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "evals")


def timed(eng, prompts, sp, concurrency):
    """Runs prompts in waves of `concurrency`; -> (outputs, completion tokens / wall second)."""
    outs = []
    if eng.runner.device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for i in range(0, len(prompts), concurrency):
        outs += eng.generate(prompts[i:i + concurrency], sp)
    if eng.runner.device.type == "cuda":
        torch.cuda.synchronize()
    return outs, sum(o.completion_tokens for o in outs) / (time.perf_counter() - t)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None, help="demo model folder (default: specpilot.demo)")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per engine (median)")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--device", default=None)
    ap.add_argument("--drafter", default=str(ASSETS_DIR / "smollm2-135m-dflash"))
    ap.add_argument("--disable-overlap-schedule", action="store_true",
                    help="time both engines without the overlap scheduler (the default has it)")
    a = ap.parse_args()
    if a.n < 1 or a.new < 1 or a.repeat < 1:
        ap.error("--n, --new and --repeat must be >= 1")
    from transformers import AutoTokenizer

    from specpilot.demo import demo_model_path

    model = a.model or demo_model_path()
    tok = AutoTokenizer.from_pretrained(model)
    ps = [render(tok, it["prompt"]) for it in eval_prompts(DATA, "gsm8k-heldout", a.n)]
    sp = SamplingParams(temperature=0, max_new_tokens=a.new)
    common = dict(model_path=model, dtype=a.dtype, device=a.device, max_total_tokens=32768,
                  max_running_requests=max(8, a.n),
                  disable_overlap_schedule=a.disable_overlap_schedule)
    ar = OfflineEngine(ServerArgs(**common))
    st = OfflineEngine(ServerArgs(**common, speculative_draft_model_path=a.drafter))
    for eng in (ar, st):  # warm-up (compiles, allocator)
        eng.generate(ps[:2], SamplingParams(temperature=0, max_new_tokens=16))
    print(f"overlap scheduler {'off' if a.disable_overlap_schedule else 'on'}; device "
          f"{ar.runner.device}, {ar.runner.info.dtype}, attention "
          f"{ar.runner.attention_backend}, graphs ar {ar.runner.graphs is not None} stock "
          f"{st.worker.verify_graphs is not None} (whole step {st.worker.step_graphs is not None})")
    print(f"{'conc':>4} {'ar tok/s':>9} {'stock tok/s':>12} {'speedup':>8} {'tau':>6} {'match':>6}"
          f"  (medians of {a.repeat}; ar / stock ranges)")
    for conc in (1, 8):
        rates = {"ar": [], "stock": []}
        for _ in range(a.repeat):
            ro, r = timed(ar, ps, sp, conc)
            so, s = timed(st, ps, sp, conc)
            rates["ar"].append(r)
            rates["stock"].append(s)
        rt, stt = (statistics.median(rates[k]) for k in ("ar", "stock"))
        tau = sum(o.completion_tokens for o in so) / max(1, sum(o.meta["spec_verify_ct"]
                                                                 for o in so))
        match = sum(x.output_ids == y.output_ids for x, y in zip(ro, so))
        spread = "  ".join(f"{min(v):.1f}-{max(v):.1f}" for v in rates.values())
        print(f"{conc:4} {rt:9.1f} {stt:12.1f} {stt / rt:8.2f} {tau:6.2f} {match:3}/{len(ps)}"
              f"  {spread}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
