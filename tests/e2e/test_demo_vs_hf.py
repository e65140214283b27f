"""Real weights: SmolLM2-135M-Instruct greedy continuations equal transformers for 32+ tokens."""

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from tests.e2e.tiny_models import hf_greedy_ids

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
    "Write a haiku about the sea.",
]
NEW = 40


def test_demo_model_matches_transformers(demo_model_dir):
    tok = AutoTokenizer.from_pretrained(demo_model_dir)
    prompts = [tok(p)["input_ids"] for p in PROMPTS[:3]]
    prompts.append(tok.apply_chat_template([{"role": "user", "content": PROMPTS[3]}],
                                           add_generation_prompt=True, tokenize=True,
                                           return_dict=False))
    hf = AutoModelForCausalLM.from_pretrained(demo_model_dir, dtype=torch.float32).eval()
    ref = [hf_greedy_ids(hf, p, NEW) for p in prompts]
    eng = OfflineEngine(ServerArgs(model_path=demo_model_dir, device="cpu", dtype="float32",
                                   max_total_tokens=2048, chunked_prefill_size=16))
    outs = eng.generate(prompts, SamplingParams(temperature=0, max_new_tokens=NEW, ignore_eos=True))
    for p, o, r in zip(PROMPTS, outs, ref):
        assert o.output_ids == r, (p, tok.decode(o.output_ids), tok.decode(r))
    assert "Paris" in tok.decode(outs[0].output_ids)
