"""Write the config.json files of the product's targets and drafters at their real shapes, for
`--load-format dummy` runs (random weights) when the checkpoints cannot be downloaded.

Values are those of the public model cards as summarised in shared/reference/dflash.md
(sections 3.1 and 4; the DSpark drafters, partly assumed: specpilot/model_configs/README.md).
Run once; the output is committed under specpilot/model_configs/.

    python scripts/make_model_configs.py
"""

import json
import os

from transformers import Qwen3_5TextConfig
from transformers.models.muse_glimmer.configuration_muse_glimmer import MuseGlimmerTextConfig

OUT = os.path.join(os.path.dirname(__file__), "..", "specpilot", "model_configs")


def write(name, cfg: dict):
    os.makedirs(os.path.join(OUT, name), exist_ok=True)
    for k in ("transformers_version", "id2label", "label2id", "_name_or_path"):
        cfg.pop(k, None)
    with open(os.path.join(OUT, name, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")


def main():
    q = Qwen3_5TextConfig(
        vocab_size=248320, hidden_size=5120, intermediate_size=17408, num_hidden_layers=64,
        num_attention_heads=24, num_key_value_heads=4, head_dim=256, linear_num_key_heads=16,
        linear_num_value_heads=48, linear_key_head_dim=128, linear_value_head_dim=128,
        linear_conv_kernel_dim=4, rms_norm_eps=1e-6, max_position_embeddings=262144,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                         "mrope_section": [11, 11, 10]}).to_dict()
    q["architectures"] = ["Qwen3_5ForCausalLM"]
    write("qwen38-27b", q)
    m = MuseGlimmerTextConfig(rope_parameters={"rope_type": "default", "rope_theta": 5e5}).to_dict()
    m["layer_rope_theta"] = [0 if t == "full_attention" else 5e5 for t in m["layer_types"]]
    m["architectures"] = ["MuseGlimmerForCausalLM"]
    write("muse-glimmer-30b", m)
    common = dict(model_type="qwen3", hidden_act="silu", attention_bias=False, rms_norm_eps=1e-6,
                  is_causal=False, sliding_window=2048, num_hidden_layers=5,
                  layer_types=["sliding_attention"] * 5)
    write("qwen38-27b-dflash2", dict(
        architectures=["DFlash2DraftModel"], **common, hidden_size=5120, intermediate_size=17408,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, rope_theta=1e7,
        vocab_size=248320, max_position_embeddings=262144, num_target_layers=64,
        dflash_config=dict(block_size=8, mask_token_id=248070, target_layer_ids=[5, 19, 33, 47, 61],
                           conv_kernel_size=2, conv_group_size=16, selector_rank=256,
                           selector_top_k=16)))
    write("muse-glimmer-30b-dflash2", dict(
        architectures=["DFlash2DraftModel"], **common, hidden_size=6656, intermediate_size=19968,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, rope_theta=5e5,
        vocab_size=202048, max_position_embeddings=131072, num_target_layers=52,
        dflash_config=dict(block_size=16, mask_token_id=201818,
                           target_layer_ids=[1, 13, 25, 37, 49], conv_kernel_size=2,
                           conv_group_size=16, selector_rank=256, selector_top_k=16,
                           output_multiplier=0.19611613513818404, final_logit_softcapping=20.0)))
    # DSpark: the DFlash backbone + a rank-256 Markov head and a confidence head; which values
    # are assumed (the checkpoints' config.json not seen): specpilot/model_configs/README.md
    dspark = dict(architectures=["Qwen3DSparkModel"], model_type="qwen3", hidden_act="silu",
                  attention_bias=False, rms_norm_eps=1e-6, is_causal=False, num_hidden_layers=5,
                  num_attention_heads=32, num_key_value_heads=8, head_dim=128)
    heads = dict(markov_rank=256, markov_head_type="vanilla", enable_confidence_head=True,
                 confidence_head_with_markov=True)
    write("qwen38-27b-dspark", dict(
        **dspark, layer_types=["full_attention"] * 5, hidden_size=5120, intermediate_size=17408,
        rope_theta=1e7, vocab_size=248320, max_position_embeddings=262144, num_target_layers=64,
        dflash_config=dict(block_size=7, mask_token_id=248070,
                           target_layer_ids=[1, 16, 31, 46, 61], **heads)))
    write("muse-glimmer-30b-dspark", dict(
        **dspark, sliding_window=2048, layer_types=["sliding_attention"] * 5, hidden_size=6656,
        intermediate_size=19968, rope_theta=5e5, vocab_size=202048,
        max_position_embeddings=131072, num_target_layers=52,
        dflash_config=dict(block_size=15, mask_token_id=201818,
                           target_layer_ids=[1, 13, 25, 37, 49],
                           output_multiplier=0.19611613513818404, final_logit_softcapping=20.0,
                           **heads)))


if __name__ == "__main__":
    main()
