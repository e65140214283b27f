"""Tiny random Muse-Glimmer checkpoints (fp32) saved by transformers' own classes.

make_tiny_muse: the full multimodal MuseGlimmerForConditionalGeneration (text tower under
`model.language_model.`, a tiny vision tower next to it), 8 layers = 2 x (3 sliding + 1 NoPE
global), sliding window 8 so test prompts cross it.
make_text_only: the same weights as a flat `muse_glimmer_text` checkpoint under `model.`
(architectures MuseGlimmerForCausalLM), no vision tensors.
make_tiny_assistant: a MuseGlimmerAssistantModel (transformers class) for that target.
"""

import json
import os

import torch
from safetensors.torch import load_file, save_file

LAYERS, HIDDEN, VOCAB, WINDOW = 8, 64, 256, 8
IMAGE_ID, VIDEO_ID = 250, 251  # in-vocab, so HF's placeholder -> token 0 mapping is exercised
TEXT = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=LAYERS,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=WINDOW,
            max_position_embeddings=512, bos_token_id=1, eos_token_id=2, pad_token_id=0,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
VISION = dict(num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2,
              patch_size=2, pos_emb_height=4, pos_emb_width=4)


def _randomize(model, seed: int):
    """Larger-than-default init so greedy paths are not decided by near-ties; every norm gain
    random too, so a missing (1 + w) or a wrong eps shows."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0, 0.08)
            elif "norm" in name:
                centered = "layernorm" in name  # sandwich norms store w, apply (1 + w)
                p.copy_((0.0 if centered else 1.0) + 0.2 * torch.randn_like(p))


def make_tiny_muse(path, **text_overrides) -> str:
    from transformers import MuseGlimmerConfig, MuseGlimmerForConditionalGeneration

    cfg = MuseGlimmerConfig(text_config={**TEXT, **text_overrides}, vision_config=VISION,
                            image_token_id=IMAGE_ID, video_token_id=VIDEO_ID,
                            out_hidden_size=VISION["hidden_size"] * 4, projector_hidden_size=48)
    model = MuseGlimmerForConditionalGeneration(cfg)
    _randomize(model, 1234)
    model.save_pretrained(str(path))
    return str(path)


def make_text_only(full_path: str, path) -> str:
    """Rewrite the multimodal checkpoint's text tower as a flat text checkpoint."""
    with open(os.path.join(full_path, "config.json")) as f:
        cfg = json.load(f)["text_config"]
    cfg["architectures"] = ["MuseGlimmerForCausalLM"]
    tensors = {}
    for name, t in load_file(os.path.join(full_path, "model.safetensors")).items():
        if name.startswith("model.language_model."):
            tensors["model." + name[len("model.language_model."):]] = t
        elif name == "lm_head.weight":
            tensors[name] = t
    os.makedirs(path, exist_ok=True)
    save_file(tensors, os.path.join(path, "model.safetensors"))
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    return str(path)


def make_tiny_assistant(path, target_layer_ids=(1, 4, 7), block_size=8, layers=2) -> str:
    from transformers import MuseGlimmerAssistantConfig, MuseGlimmerAssistantModel

    cfg = MuseGlimmerAssistantConfig(
        hidden_size=HIDDEN, intermediate_size=96, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=512, sliding_window=5,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, block_size=block_size,
        mask_token_id=VOCAB - 1, target_layer_ids=list(target_layer_ids),
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    model = MuseGlimmerAssistantModel(cfg)
    _randomize(model, 99)
    with torch.no_grad():  # the assistant's norms are plain weights (no +1)
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    model.save_pretrained(str(path))
    return str(path)


def load_hf_target(path: str):
    from transformers import MuseGlimmerForConditionalGeneration

    return MuseGlimmerForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
