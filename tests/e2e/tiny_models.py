"""Tiny random Hugging Face checkpoints (fp32) written to a folder, for exactness tests."""

import inspect

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

COMMON = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def make_tiny(kind: str, path, **overrides) -> str:
    """kind: 'llama', 'qwen3' or 'qwen3_5'. Saves config + model.safetensors; returns the folder."""
    torch.manual_seed(1234)
    if kind == "llama":
        cfg = LlamaConfig(**{**COMMON, "tie_word_embeddings": False, **overrides})
        model = LlamaForCausalLM(cfg)
    elif kind == "qwen3":
        cfg = Qwen3Config(**{**COMMON, "head_dim": 32, "tie_word_embeddings": True, **overrides})
        model = Qwen3ForCausalLM(cfg)
    elif kind == "qwen3_5":
        from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

        cfg = Qwen3_5TextConfig(**{
            **COMMON, "num_hidden_layers": 8, "head_dim": 32, "tie_word_embeddings": False,
            "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
            "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"]
            + ["linear_attention"] * 3 + ["full_attention"], **overrides})
        model = Qwen3_5ForCausalLM(cfg)
    else:
        raise ValueError(kind)
    # Larger-than-default init so greedy paths are not dominated by near-ties.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.08)
            elif "norm" in name:  # (1 + w) norms start at w = 0: make them matter
                p.normal_(0, 0.1) if kind == "qwen3_5" else None
    model.save_pretrained(str(path))
    return str(path)


def hf_greedy_ids(model, prompt: list[int], max_new_tokens: int) -> list[int]:
    """transformers greedy continuation that never stops at EOS (what ignore_eos means for us;
    generate(min_new_tokens=...) would instead forbid EOS, a different continuation)."""
    # transformers 5.x renames `past_key_values` to `cache` (the old name warns, and goes in
    # 5.40); take whichever this version's forward declares
    key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    ids, past, out = torch.tensor([prompt]), None, []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            res = model(input_ids=ids, use_cache=True, **{key: past})
            past = res[key]
            nxt = int(res.logits[0, -1].argmax())
            out.append(nxt)
            ids = torch.tensor([[nxt]])
    return out


def hf_greedy(path: str, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """transformers greedy, one prompt at a time (no padding), EOS ignored."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return [hf_greedy_ids(model, p, max_new_tokens) for p in prompts]


class FreshRequestBackend:
    """Attention backend of one fresh request, all rows new: causal (optionally windowed) SDPA
    without a KV cache, for running a model's layer stack directly."""

    def forward(self, q, k, v, layer_id, scale, window=None, gate=None):
        t = q.shape[0]
        pos = torch.arange(t)
        mask = pos[None, :] <= pos[:, None]
        if window is not None:
            mask &= pos[:, None] - pos[None, :] < window
        o = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask, scale=scale,
            enable_gqa=True)
        return o.transpose(0, 1) if gate is None else o.transpose(0, 1) * torch.sigmoid(gate)
