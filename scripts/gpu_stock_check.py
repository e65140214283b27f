"""GPU check of the stock engine on the demo model with a random DFlash drafter (a script).

A random drafter accepts almost nothing, which is the point here: whatever it proposes, stock must
emit exactly what ar emits. Compares greedy tokens of ar and stock (fp32 and bf16, block 8 and 16)
for a batch of 4 prompts, and prints the acceptance counters.

    python scripts/gpu_stock_check.py --model-path DIR [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from transformers import AutoConfig, AutoTokenizer  # noqa: E402

from specpilot.config import ServerArgs  # noqa: E402
from specpilot.core import SamplingParams  # noqa: E402
from specpilot.offline import OfflineEngine  # noqa: E402
from specpilot.bench.random_drafter import make_random_drafter  # noqa: E402

PROMPTS = ["What is 12 + 30?", "Write a Python function that reverses a string.",
           "Name three colours.", "Explain gravity in one sentence."]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--new", type=int, default=64)
    a = ap.parse_args()
    cfg = AutoConfig.from_pretrained(a.model_path)
    tok = AutoTokenizer.from_pretrained(a.model_path)
    prompts = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                       tokenize=True, return_dict=False) for p in PROMPTS]
    n = cfg.num_hidden_layers
    draft = make_random_drafter(tempfile.mkdtemp(), target_layers=(1, n // 2, n - 3),
                                hidden=cfg.hidden_size, vocab=cfg.vocab_size,
                                mask=cfg.vocab_size - 1, num_target_layers=n)
    sp = SamplingParams(temperature=0, max_new_tokens=a.new, ignore_eos=True)
    ok = True
    for dtype in ("float32", "bfloat16"):
        common = dict(model_path=a.model_path, device=a.device, dtype=dtype,
                      max_total_tokens=8192)
        ar = [o.output_ids for o in OfflineEngine(ServerArgs(**common)).generate(prompts, sp)]
        for b in (8, 16):
            eng = OfflineEngine(ServerArgs(**common, speculative_draft_model_path=draft,
                                           speculative_num_draft_tokens=b))
            outs = eng.generate(prompts, sp)
            same = [o.output_ids == r for o, r in zip(outs, ar)]
            m = outs[0].meta
            print(f"{dtype:9} block {b:2}: stock == ar for {sum(same)}/{len(same)} prompts; "
                  f"verify steps {m['spec_verify_ct']}, accepted drafts "
                  f"{m['spec_num_correct_drafts']}/{m['spec_num_proposed_drafts']}")
            # token forcing: ar's tokens through stock's verify path; every disagreement's gap
            checks = eng.force(prompts, ar)
            bad = [(i, j, gap) for i, (c, r) in enumerate(zip(checks, ar))
                   for j, ((top, gap), want) in enumerate(zip(c, r)) if top != want]
            worst = max((g for _, _, g in bad), default=0.0)
            print(f"{'':9} forcing ar -> stock: {len(bad)} of {sum(map(len, ar))} positions "
                  f"disagree; largest top-2 gap at a disagreement {worst:.3g}")
            ok &= all(same) or dtype == "bfloat16"
    print("stock vs ar (fp32):", "PASS" if ok else "FAIL")


if __name__ == "__main__":
    main()
