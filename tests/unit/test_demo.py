"""The embedded demo model folder (specpilot/demo.py): files, config, tokenizer, weights."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from specpilot import demo


def test_folder_has_expected_files(demo_model_dir):
    folder = Path(demo_model_dir)
    assert folder == demo.demo_model_dir()
    for name in demo.REQUIRED_FILES + (demo.MARKER,):
        assert (folder / name).is_file(), name
    marker = json.loads((folder / demo.MARKER).read_text())
    assert marker["format_version"] == demo.FORMAT_VERSION
    assert marker["source"] == demo.PACKAGE_PIN
    demo.check_folder(folder)


def test_config_loads_with_transformers(demo_model_dir):
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(demo_model_dir)
    assert cfg.model_type == "llama"
    assert cfg.architectures == ["LlamaForCausalLM"]
    assert cfg.tie_word_embeddings is True
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size) == (576, 30, 1536)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads) == (9, 3)
    assert cfg.vocab_size == 49152
    assert getattr(cfg, "quantization_config", None) is None  # a plain dense checkpoint


def test_weights_are_dense_bf16_and_tied(demo_model_dir):
    from safetensors import safe_open

    with safe_open(str(Path(demo_model_dir) / "model.safetensors"), framework="pt") as f:
        keys = set(f.keys())
        emb = f.get_slice("model.embed_tokens.weight")
        assert emb.get_shape() == [49152, 576]
        assert emb.get_dtype() == "BF16"
    assert "lm_head.weight" not in keys  # tied to the embedding
    assert sum(k.startswith("model.layers.") for k in keys) == 30 * 9


def test_tokenizer_renders_chatml(demo_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_model_dir)
    assert tok.chat_template
    text = tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n"
                    "<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n")
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.eos_token_id == im_end
    gen = json.loads((Path(demo_model_dir) / "generation_config.json").read_text())
    eos = gen["eos_token_id"]
    assert im_end in (eos if isinstance(eos, list) else [eos])


def test_weights_are_real(demo_model_dir):
    """The dequantized weights are the pretrained model: it knows the capital of France."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_model_dir)
    model = AutoModelForCausalLM.from_pretrained(demo_model_dir, dtype=torch.float32).eval()
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits[0, -1]
    assert tok.decode(int(logits.argmax())).strip() == "Paris"


def test_prepared_folder_is_reused_fast(demo_model_dir):
    t0 = time.perf_counter()
    assert demo.demo_model_path() == demo_model_dir
    assert time.perf_counter() - t0 < 5.0  # no reconversion


def test_incomplete_folder_is_rejected(demo_model_dir, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(Path(demo_model_dir) / "config.json", broken / "config.json")
    with pytest.raises(RuntimeError, match="missing"):
        demo.check_folder(broken)
    assert not demo._is_ready(broken, None)  # no marker: never reused
