"""Drafter configs and checkpoints: lookup order, layouts, and the refusals with their messages."""

import json
import os

import pytest
import torch
from safetensors.torch import load_file, save_file

from specpilot.models.loader import WeightLoadError, build_model
from specpilot.spec.draft_config import DraftConfig, DraftConfigError, default_target_layer_ids
from specpilot.spec.draft_loader import load_drafter
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import make_tiny


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    path = make_tiny("qwen3", tmp_path_factory.mktemp("t"))
    model, _ = build_model(path, torch.float32, torch.device("cpu"), 600)
    return model


def load(path, target):
    return load_drafter(str(path), target, torch.float32, torch.device("cpu"), 600)


def edit_config(path, fn):
    cfg = json.load(open(os.path.join(path, "config.json")))
    fn(cfg)
    json.dump(cfg, open(os.path.join(path, "config.json"), "w"))


@pytest.mark.parametrize("kind,algo", [("dflash", "DFLASH"), ("dflash2", "DFLASH2"),
                                       ("dspark", "DSPARK"), ("muse", "DFLASH")])
def test_layouts_load_and_share_target_head(tmp_path, target, kind, algo):
    d = load(make_drafter(kind, tmp_path), target)
    assert d.dc.algorithm == algo
    assert d._target[0] is target.get_input_embeddings() and d._target[1] is target.lm_head
    assert not any(n.startswith(("embed", "lm_head")) for n, _ in d.named_parameters())


def test_lookup_order_dflash_config_first(tmp_path, target):
    path = make_drafter("dflash", tmp_path, block_size=8)
    edit_config(path, lambda c: c.update(block_size=4))  # top level loses to dflash_config
    assert load(path, target).dc.block_size == 8


def test_layer_masks(tmp_path, target):
    d2 = load(make_drafter("dflash2", tmp_path / "a"), target).dc
    assert d2.layer_causal == (False, False) and d2.layer_window == (6, 6)
    # Muse assistant as transformers runs it: bidirectional, inclusive window (5 -> strict 6)
    muse = load(make_drafter("muse", tmp_path / "b"), target).dc
    assert muse.layer_causal == (False, False) and muse.layer_window == (6, 6)
    dflash = load(make_drafter("dflash", tmp_path / "c", layer_types=["sliding_attention"] * 2,
                               sliding_window=4), target).dc  # no is_causal: sliding = causal
    assert dflash.layer_causal == (True, True) and dflash.layer_window == (4, 4)


def test_default_layer_ids():
    assert default_target_layer_ids(36, 5) == [1, 9, 17, 25, 33]
    assert default_target_layer_ids(36, 1) == [18]


@pytest.mark.parametrize("edit,msg", [
    (lambda c: c["dflash_config"].update(mask_token_id=256), "mask_token_id 256 is outside"),
    (lambda c: c["dflash_config"].update(target_layer_ids=[0, 3]), "out of range"),
    (lambda c: c["dflash_config"].update(conv_kernel_size=2), "must be given together"),
    (lambda c: c["dflash_config"].update(selector_rank=4), "must be given together"),
    (lambda c: c.update(architectures=["EagleDraft"]), "unsupported drafter architecture"),
    (lambda c: c.update(num_target_layers=36), "36-layer target"),
])
def test_config_refusals(tmp_path, target, edit, msg):
    path = make_drafter("dflash", tmp_path)
    edit_config(path, edit)
    with pytest.raises(DraftConfigError, match=msg):
        load(path, target)


def _flat(c, **kv):   # a key where the drafter's config keeps it (dflash_config or top level)
    (c["dflash_config"] if "dflash_config" in c else c).update(kv)


@pytest.mark.parametrize("kind,edit,msg", [
    ("dflash", lambda c: _flat(c, block_size=1), "block_size 1 is too small"),
    ("dflash", lambda c: _flat(c, block_size=0), "block_size 0 is too small"),
    ("dspark", lambda c: _flat(c, block_size=0), "block_size 0 is too small"),
    ("dspark", lambda c: c.update(vocab_size=300), "vocab_size 300 does not match"),
    ("dspark", lambda c: c.update(vocab_size=128), "vocab_size 128 does not match"),
    ("dflash2", lambda c: c.update(vocab_size=128), "vocab_size 128 does not match"),
    ("dflash2", lambda c: _flat(c, selector_top_k=0), "selector_top_k 0 must be in"),
    ("dflash2", lambda c: _flat(c, selector_top_k=1000), "selector_top_k 1000 must be in"),
    ("dflash2", lambda c: _flat(c, conv_group_size=0), "conv_group_size 0 must divide"),
])
def test_config_refusals_block_vocab_selector(tmp_path, target, kind, edit, msg):
    """Values that loaded and then aborted every request (a drafter vocabulary other than the
    target's, a selector top-k of 0 or above the vocabulary) or failed far from their cause (a
    block of 0 or 1 blamed on --speculative-num-draft-tokens, a group of 0 dividing by zero)
    are refused at load, naming the key."""
    path = make_drafter(kind, tmp_path)
    edit_config(path, edit)
    with pytest.raises(DraftConfigError, match=msg):
        load(path, target)


def test_fc_width_mismatch(tmp_path, target):
    path = make_drafter("dflash", tmp_path)
    t = load_file(os.path.join(path, "model.safetensors"))
    t["fc.weight"] = torch.zeros(64, 3 * 64)
    save_file(t, os.path.join(path, "model.safetensors"))
    with pytest.raises(WeightLoadError, match="fc.weight.*does not match 2 target layers"):
        load(path, target)


def test_missing_selector_tensor(tmp_path, target):
    path = make_drafter("dflash2", tmp_path)
    t = load_file(os.path.join(path, "model.safetensors"))
    del t["candidate_selector.successor_codebook"]
    save_file(t, os.path.join(path, "model.safetensors"))
    with pytest.raises(WeightLoadError, match="candidate_selector.successor_codebook"):
        load(path, target)


def test_from_dict_flat_muse_keys():
    raw = {"architectures": ["MuseGlimmerAssistantModel"], "hidden_size": 64,
           "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
           "intermediate_size": 96, "block_size": 16, "mask_token_id": 10,
           "target_layer_ids": [1]}
    dc = DraftConfig.from_dict(raw, num_target_layers=4, target_vocab=100)
    assert (dc.block_size, dc.mask_token_id, dc.target_layer_ids) == (16, 10, (1,))


def test_num_draft_tokens_zero_is_refused_not_defaulted(tmp_path):
    """--speculative-num-draft-tokens 0 is refused like 1 (it was taken as not given, the
    drafter's block size silently used); not giving it uses the drafter's."""
    from specpilot.config import ServerArgs
    from specpilot.offline import OfflineEngine
    t, d = make_tiny("qwen3", tmp_path / "t"), make_drafter("dflash", tmp_path / "d", block_size=8)
    args = dict(model_path=t, device="cpu", max_total_tokens=1024, speculative_draft_model_path=d)
    for n in (0, 1):
        with pytest.raises(ValueError, match="--speculative-num-draft-tokens must be in"):
            OfflineEngine(ServerArgs(**args, speculative_num_draft_tokens=n))
    assert OfflineEngine(ServerArgs(**args)).worker.num_draft_tokens == 8
