"""GPU check of the `ar` engine on the demo model (a script, not a test).

Runs the same greedy prompts on: CPU fp32 (reference), CUDA fp32, CUDA bf16. Reports, per prompt,
whether CUDA fp32 equals CPU fp32 token for token; where they differ, the top-2 logit gap of the
CPU fp32 model at the first differing position (a near-tie is a gap < 1e-3). Also times decode
tokens/s on CUDA at batch 1 and 8 (reference torch attention; the fast path is separate work).

    python scripts/gpu_demo_check.py --model-path DIR [--new 64] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from transformers import AutoTokenizer

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine

PROMPTS = [
    "What is the capital of France? Answer in one sentence.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
    "in May. How many clips did Natalia sell altogether in April and May?",
    "Explain in two sentences why the sky is blue.",
    "List three prime numbers greater than 100.",
    "Translate 'good morning' into French, German and Spanish.",
    "What is 17 times 23?",
    "Give a short definition of entropy.",
]


def run(model_path, device, dtype, prompts, new, chunk=2048):
    eng = OfflineEngine(ServerArgs(model_path=model_path, device=device, dtype=dtype,
                                   max_total_tokens=16384, chunked_prefill_size=chunk))
    sp = SamplingParams(temperature=0, max_new_tokens=new, ignore_eos=True)
    outs = eng.generate(prompts, sp)
    return eng, [o.output_ids for o in outs]


def decode_rate(eng, prompts, new, bs):
    sp = SamplingParams(temperature=0, max_new_tokens=new, ignore_eos=True)
    eng.generate(prompts[:bs], SamplingParams(temperature=0, max_new_tokens=4, ignore_eos=True))
    if eng.runner.device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    eng.generate(prompts[:bs], sp)
    if eng.runner.device.type == "cuda":
        torch.cuda.synchronize()
    return bs * new / (time.perf_counter() - t)


def top2_gap(eng, prompt, tokens, pos):
    """Top-2 logit gap of `eng` at output position `pos` (tokens forced up to there)."""
    return eng.force([prompt], [tokens[:pos + 1]])[0][pos][1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--json", default=None)
    ap.add_argument("--device", default="cuda", help="cpu only for a dry run of this script")
    a = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(a.model_path)
    prompts = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                       tokenize=True, return_dict=False) for p in PROMPTS]
    cpu_eng, cpu = run(a.model_path, "cpu", "float32", prompts, a.new)
    name = torch.cuda.get_device_name(0) if a.device == "cuda" else a.device
    rows, report = [], {"device": name, "new_tokens": a.new}
    for dtype in ("float32", "bfloat16"):
        eng, gpu = run(a.model_path, a.device, dtype, prompts, a.new)
        for i, (c, g) in enumerate(zip(cpu, gpu)):
            same = next((j for j, (x, y) in enumerate(zip(c, g)) if x != y), None)
            gap = None if same is None else top2_gap(cpu_eng, prompts[i], c, same)
            rows.append({"dtype": dtype, "prompt": i, "equal": same is None,
                         "first_diff": same, "cpu_top2_gap": gap})
        report[f"decode_tok_s_{dtype}"] = {bs: round(decode_rate(eng, prompts, a.new, bs), 1)
                                          for bs in (1, 8)}
        del eng
        if a.device == "cuda":
            torch.cuda.empty_cache()
    report["rows"] = rows
    print(f"{'dtype':9} {'prompt':6} {'equal':6} {'first_diff':10} cpu_top2_gap")
    for r in rows:
        gap = "" if r["cpu_top2_gap"] is None else f"{r['cpu_top2_gap']:.2e}"
        print(f"{r['dtype']:9} {r['prompt']:<6} {str(r['equal']):6} {str(r['first_diff']):10} {gap}")
    for dtype in ("float32", "bfloat16"):
        print(f"decode tokens/s {dtype}: {report[f'decode_tok_s_{dtype}']}")
    fp32 = [r for r in rows if r["dtype"] == "float32"]
    ok = all(r["equal"] or r["cpu_top2_gap"] < 1e-3 for r in fp32)
    report["fp32_pass"] = ok
    print("fp32 CUDA vs CPU:", "PASS" if ok else "FAIL")
    print("sample bf16 output:", tok.decode(gpu[0])[:200].replace("\n", " "))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
