"""Tiny random drafter checkpoints in the four public layouts (names as the released files)."""

import json
import os

import torch
from safetensors.torch import save_file

H, HEADS, KV, HD, FF, V = 64, 4, 2, 16, 96, 256
MASK = 255


def _layer(i, conv=None, H=H):
    t = {f"layers.{i}.input_layernorm.weight": [H], f"layers.{i}.post_attention_layernorm.weight": [H],
         f"layers.{i}.self_attn.q_proj.weight": [HEADS * HD, H],
         f"layers.{i}.self_attn.k_proj.weight": [KV * HD, H],
         f"layers.{i}.self_attn.v_proj.weight": [KV * HD, H],
         f"layers.{i}.self_attn.o_proj.weight": [H, HEADS * HD],
         f"layers.{i}.self_attn.q_norm.weight": [HD], f"layers.{i}.self_attn.k_norm.weight": [HD],
         f"layers.{i}.mlp.gate_proj.weight": [FF, H], f"layers.{i}.mlp.up_proj.weight": [FF, H],
         f"layers.{i}.mlp.down_proj.weight": [H, FF]}
    if conv:
        k, g = conv
        for name in ("attention_conv", "mlp_conv"):
            t[f"layers.{i}.{name}.base_kernel"] = [2, k, H]
            t[f"layers.{i}.{name}.kernel_projection.weight"] = [2 * k * (H // g), H]
    return t


def make_drafter(kind: str, path, target_layers=(0, 2), layers=2, block_size=8, hidden=H,
                 vocab=V, mask=MASK, num_target_layers=3, **extra) -> str:
    """kind: dflash | dflash2 | dspark | muse. Returns the folder."""
    torch.manual_seed(99)
    H, V, MASK = hidden, vocab, mask  # noqa: N806
    backbone = dict(hidden_size=H, intermediate_size=FF, num_hidden_layers=layers,
                    num_attention_heads=HEADS, num_key_value_heads=KV, head_dim=HD,
                    rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=512,
                    vocab_size=V, hidden_act="silu", attention_bias=False)
    shapes = {"fc.weight": [H, len(target_layers) * H], "hidden_norm.weight": [H], "norm.weight": [H]}
    conv = (2, 16) if kind == "dflash2" else None
    for i in range(layers):
        shapes.update(_layer(i, conv, H))
    dflash = {"mask_token_id": MASK, "target_layer_ids": list(target_layers), "block_size": block_size}
    cfg = {**backbone, "model_type": "qwen3", "num_target_layers": num_target_layers}
    if kind == "dflash":
        cfg.update(architectures=["DFlashDraftModel"], block_size=block_size, dflash_config=dflash)
    elif kind == "dflash2":
        dflash.update(conv_kernel_size=2, conv_group_size=16, selector_rank=8, selector_top_k=4,
                      output_multiplier=0.5, final_logit_softcapping=20.0)
        cfg.update(architectures=["DFlash2DraftModel"], is_causal=False, sliding_window=6,
                   layer_types=["sliding_attention"] * layers, dflash_config=dflash)
        shapes.update({"candidate_selector.hidden_projection.weight": [8, H],
                       "candidate_selector.predecessor_codebook": [V, 8],
                       "candidate_selector.successor_codebook": [V, 8]})
    elif kind == "dspark":
        cfg.update(architectures=["Qwen3DSparkModel"], block_size=block_size - 1, markov_rank=8,
                   markov_head_type="vanilla", enable_confidence_head=True,
                   confidence_head_with_markov=True, mask_token_id=MASK,
                   target_layer_ids=list(target_layers))
        shapes.update({"markov_head.markov_w1.weight": [V, 8], "markov_head.markov_w2.weight": [V, 8],
                       "confidence_head.proj.weight": [1, H + 8], "confidence_head.proj.bias": [1]})
    elif kind == "muse":
        cfg.update(architectures=["MuseGlimmerAssistantModel"], model_type="muse_glimmer_assistant",
                   block_size=block_size, mask_token_id=MASK, target_layer_ids=list(target_layers),
                   layer_types=["sliding_attention"] * layers, sliding_window=5)
        shapes["encoder.fc.weight"] = shapes.pop("fc.weight")
        shapes["encoder.output_norm_enc.weight"] = shapes.pop("hidden_norm.weight")
    else:
        raise ValueError(kind)
    cfg.update(extra)
    tensors = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight") or "layernorm" in name or "norm_enc" in name:
            tensors[name] = 1.0 + 0.1 * torch.randn(shape)
        elif name.endswith("base_kernel"):
            t = 0.1 * torch.randn(shape)
            t[:, 0] += 1.0
            tensors[name] = t
        else:
            tensors[name] = 0.1 * torch.randn(shape)
    os.makedirs(path, exist_ok=True)
    save_file(tensors, os.path.join(path, "model.safetensors"))
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    return str(path)
