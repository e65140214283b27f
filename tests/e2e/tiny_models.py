"""Tiny random Hugging Face checkpoints (fp32) written to a folder, for exactness tests."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

COMMON = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def make_tiny(kind: str, path, **overrides) -> str:
    """kind: 'llama' or 'qwen3'. Saves config + model.safetensors; returns the folder."""
    torch.manual_seed(1234)
    if kind == "llama":
        cfg = LlamaConfig(**{**COMMON, "tie_word_embeddings": False, **overrides})
        model = LlamaForCausalLM(cfg)
    elif kind == "qwen3":
        cfg = Qwen3Config(**{**COMMON, "head_dim": 32, "tie_word_embeddings": True, **overrides})
        model = Qwen3ForCausalLM(cfg)
    else:
        raise ValueError(kind)
    # Larger-than-default init so greedy paths are not dominated by near-ties.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.08)
    model.save_pretrained(str(path))
    return str(path)


def hf_greedy(path: str, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """transformers generate, one prompt at a time (no padding), greedy, eos ignored."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    outs = []
    for p in prompts:
        ids = torch.tensor([p])
        with torch.no_grad():
            g = model.generate(ids, max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens,
                               do_sample=False, attention_mask=torch.ones_like(ids))
        outs.append(g[0, len(p):].tolist())
    return outs
