"""--load-format dummy builds a model of the real shapes from config.json alone, with random
(non-zero) weights, and it runs."""

import json
import os

import torch

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import make_tiny


def test_dummy_target_and_drafter(tmp_path):
    real = make_tiny("qwen3_5", tmp_path / "real")
    cfg_only = tmp_path / "cfg"
    os.makedirs(cfg_only)
    with open(os.path.join(real, "config.json")) as f:
        json.dump(json.load(f), open(cfg_only / "config.json", "w"))
    draft = make_drafter("dflash2", tmp_path / "d", target_layers=(1, 5), num_target_layers=8)
    os.remove(os.path.join(draft, "model.safetensors"))
    eng = OfflineEngine(ServerArgs(model_path=str(cfg_only), device="cpu", load_format="dummy",
                                   max_total_tokens=256, speculative_draft_model_path=draft,
                                   speculative_draft_load_format="dummy",
                                   speculative_num_draft_tokens=4, skip_tokenizer_init=True))
    w = eng.runner.model.text.layers[0].linear_attn.in_proj.weight  # fused in_proj_{qkv,z,b,a}
    assert w.abs().sum() > 0 and abs(w.std().item() - 0.02) < 0.005
    assert eng.worker.drafter.fc.weight.abs().sum() > 0
    out = eng.generate([[3, 4, 5]], SamplingParams(temperature=0, max_new_tokens=6,
                                                  ignore_eos=True))[0]
    assert len(out.output_ids) == 6
    assert torch.isfinite(eng.runner.states.rec).all()


def test_dummy_dspark_drafter_from_shipped_config(tmp_path):
    """The shipped Qwen3.8-27B DSpark config (specpilot/model_configs), its dimensions scaled to a
    tiny hybrid target, builds with --load-format dummy (Markov and confidence heads random, not
    zero) and drafts: the keys the real-shape runs read are the ones the engine takes."""
    from specpilot.costmodel.__main__ import MODEL_CONFIGS

    target = make_tiny("qwen3_5", tmp_path / "t")
    with open(os.path.join(MODEL_CONFIGS, "qwen38-27b-dspark", "config.json")) as f:
        raw = json.load(f)
    raw.update(hidden_size=64, intermediate_size=128, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, vocab_size=256, num_hidden_layers=2,
               layer_types=raw["layer_types"][:2], num_target_layers=8)
    raw["dflash_config"].update(mask_token_id=255, target_layer_ids=[1, 5], markov_rank=16)
    os.makedirs(tmp_path / "d")
    with open(tmp_path / "d" / "config.json", "w") as f:
        json.dump(raw, f)
    eng = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=256,
                                   speculative_draft_model_path=str(tmp_path / "d"),
                                   speculative_draft_load_format="dummy",
                                   skip_tokenizer_init=True))
    d = eng.worker.drafter
    assert d.dc.algorithm == "DSPARK" and d.dc.num_draft_tokens == 8
    for p in (d.markov_head.parameters(), d.confidence_head.parameters()):
        assert all(w.abs().sum() > 0 for w in p)
    out = eng.generate([[3, 4, 5]], SamplingParams(temperature=0, max_new_tokens=10,
                                                  ignore_eos=True))[0]
    assert len(out.output_ids) == 10
