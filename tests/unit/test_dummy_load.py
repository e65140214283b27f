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
