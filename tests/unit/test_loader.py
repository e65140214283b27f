"""Loading fails early, naming the tensor, on unknown architectures and bad checkpoints."""

import json
import os

import pytest
import torch
from safetensors.torch import load_file, save_file

from specpilot.models.loader import WeightLoadError, build_model
from tests.e2e.tiny_models import make_tiny


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return make_tiny("llama", tmp_path_factory.mktemp("llama"))


def copy_with(src, dst, edit=None, config_edit=None):
    os.makedirs(dst, exist_ok=True)
    cfg = json.load(open(os.path.join(src, "config.json")))
    if config_edit:
        config_edit(cfg)
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"))
    tensors = load_file(os.path.join(src, "model.safetensors"))
    if edit:
        edit(tensors)
    save_file(tensors, os.path.join(dst, "model.safetensors"))
    return str(dst)


def load(path):
    return build_model(path, torch.float32, torch.device("cpu"), 64)


def test_loads(tiny_llama):
    model, cfg = load(tiny_llama)
    assert type(model).__name__ == "LlamaForCausalLM"


def test_unknown_architecture(tiny_llama, tmp_path):
    path = copy_with(tiny_llama, tmp_path, config_edit=lambda c: c.update(architectures=["FooLM"]))
    with pytest.raises(ValueError, match="FooLM"):
        load(path)


def test_missing_tensor(tiny_llama, tmp_path):
    name = "model.layers.1.mlp.up_proj.weight"
    path = copy_with(tiny_llama, tmp_path, edit=lambda t: t.pop(name))
    with pytest.raises(WeightLoadError, match=name.replace(".", r"\.")):
        load(path)


def test_misshaped_tensor(tiny_llama, tmp_path):
    name = "model.layers.0.self_attn.k_proj.weight"
    path = copy_with(tiny_llama, tmp_path, edit=lambda t: t.__setitem__(name, t[name][:-1]))
    with pytest.raises(WeightLoadError, match=name.replace(".", r"\.") + ".*shape"):
        load(path)


def test_unexpected_tensor(tiny_llama, tmp_path):
    path = copy_with(tiny_llama, tmp_path,
                     edit=lambda t: t.__setitem__("model.extra.weight", torch.zeros(2)))
    with pytest.raises(WeightLoadError, match="model.extra.weight"):
        load(path)


def test_sharded_checkpoint(tiny_llama, tmp_path):
    tensors = load_file(os.path.join(tiny_llama, "model.safetensors"))
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2],
              "model-00002-of-00002.safetensors": names[1::2]}
    weight_map = {}
    for fn, ns in shards.items():
        save_file({n: tensors[n] for n in ns}, os.path.join(tmp_path, fn))
        weight_map.update({n: fn for n in ns})
    json.dump({"weight_map": weight_map}, open(tmp_path / "model.safetensors.index.json", "w"))
    json.dump(json.load(open(os.path.join(tiny_llama, "config.json"))),
              open(tmp_path / "config.json", "w"))
    model, _ = load(str(tmp_path))
    ref, _ = load(tiny_llama)
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert torch.equal(p, q), n


def test_tied_embeddings(tmp_path):
    path = make_tiny("qwen3", tmp_path)
    model, _ = load(path)
    assert model.lm_head.weight is model.model.embed_tokens.weight
