"""Muse-Glimmer target (tiny random, fp32, CPU) against transformers, and `stock` against `ar`.

The target has 8 layers = 2 x (3 sliding-window + 1 global NoPE) with window 8: prompts and
verify blocks cross the window edge, and rejected verify rows are rolled back across it.
"""

import random

import pytest
import torch

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import FreshRequestBackend, hf_greedy_ids
from tests.e2e.tiny_muse import (HIDDEN, IMAGE_ID, LAYERS, VOCAB, WINDOW, load_hf_target,
                                 make_text_only, make_tiny_assistant, make_tiny_muse)

NEW = 64
GREEDY = SamplingParams(temperature=0, max_new_tokens=NEW, ignore_eos=True)
DRAFT_LAYERS = (1, 4, 7)  # 7 = the last layer: its feature is taken after the final norm


def prompts():
    rng = random.Random(11)
    ps = [[rng.randrange(3, 250) for _ in range(n)] for n in (1, 6, 13, 29)]
    ps[2][5] = IMAGE_ID  # HF embeds image/video placeholders as token 0: so must we
    assert max(map(len, ps)) > 3 * WINDOW
    return ps


def engine(path, **kw):
    kw.setdefault("max_total_tokens", 2048)
    return OfflineEngine(ServerArgs(model_path=path, device="cpu", dtype="float32", **kw))


def run(eng, ps=None):
    outs = eng.generate(ps or prompts(), GREEDY)
    assert eng.scheduler.alloc.used_tokens == 0
    if eng.args.speculative_draft_model_path:
        assert all(o.meta["spec_verify_ct"] >= 1 for o in outs)
    return [o.output_ids for o in outs]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """(multimodal checkpoint folder, transformers greedy ids per prompt)."""
    path = make_tiny_muse(tmp_path_factory.mktemp("muse"))
    hf = load_hf_target(path)
    return path, [hf_greedy_ids(hf, p, NEW) for p in prompts()]


@pytest.fixture(scope="module")
def ar_ref(target):
    return run(engine(target[0], chunked_prefill_size=0))


@pytest.mark.parametrize("chunk", [0, 5])
def test_matches_transformers(target, ar_ref, chunk):
    path, ref = target
    outs = ar_ref if chunk == 0 else run(engine(path, chunked_prefill_size=chunk))
    assert outs == ref


def test_attention_bias_and_partial_rotary_factor(tmp_path):
    """attention_bias (q/k/v biased, the gate not: their fused projection gets zeros for the
    gate's bias; loading failed on the mixed biases) and a partial_rotary_factor (ignored by
    Muse's default RoPE, which rotates the whole head): transformers' greedy tokens."""
    path = make_tiny_muse(tmp_path / "m", attention_bias=True, rope_parameters={
        "rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5})
    hf = load_hf_target(path)
    ps = prompts()[2:]
    assert run(engine(path), ps) == [hf_greedy_ids(hf, p, NEW) for p in ps]


def test_text_only_layout(target, tmp_path):
    """The same weights as a flat `muse_glimmer_text` checkpoint (MuseGlimmerForCausalLM, tensors
    under `model.`): no vision tower, and no placeholder-id mapping."""
    path, _ = target
    flat = make_text_only(path, tmp_path / "text")
    hf = load_hf_target(path)
    hf.config.image_token_id = hf.config.video_token_id = -1  # HF without the placeholder mapping
    ps = prompts()[2:]
    ref = [hf_greedy_ids(hf, p, 24) for p in ps]
    outs = engine(flat, chunked_prefill_size=7).generate(
        ps, SamplingParams(temperature=0, max_new_tokens=24, ignore_eos=True))
    assert [o.output_ids for o in outs] == ref


def test_model_contract(target):
    """Raw embedding table for the drafter, untied head, KV spec, capture = HF hidden_states."""
    from specpilot.models.loader import build_model

    path, _ = target
    model, _ = build_model(path, torch.float32, torch.device("cpu"), 128)
    hf = load_hf_target(path)
    emb = model.get_input_embeddings()
    assert isinstance(emb, torch.nn.Embedding) and type(emb) is torch.nn.Embedding
    assert torch.equal(emb.weight, hf.model.language_model.embed_tokens.weight)
    assert model.lm_head.weight.data_ptr() != emb.weight.data_ptr()
    assert model.kv_cache_spec() == (LAYERS, 2, 16)
    assert model.model.layers[0].self_attn.num_kv_heads == 2
    assert model.config.num_hidden_layers == LAYERS and model.config.vocab_size == VOCAB
    windows = [lyr.self_attn.window for lyr in model.model.layers]
    assert windows == [WINDOW, WINDOW, WINDOW, None] * 2
    nope = [lyr.self_attn.rotary is None for lyr in model.model.layers]
    assert nope == [False, False, False, True] * 2

    ids = torch.tensor([prompts()[3]])
    with torch.no_grad():
        res = hf(input_ids=ids, output_hidden_states=True)
        capture = (0, 3, LAYERS - 1)
        hidden, aux = model(ids[0], torch.arange(ids.shape[1]), FreshRequestBackend(), capture)
        logits = model.compute_logits(hidden)
    want = torch.cat([res.hidden_states[i + 1][0] for i in capture], dim=-1)
    assert aux.shape == (ids.shape[1], len(capture) * HIDDEN)
    torch.testing.assert_close(aux, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits, res.logits[0].float(), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def drafters(tmp_path_factory):
    kw = dict(hidden=HIDDEN, vocab=VOCAB, mask=VOCAB - 1, num_target_layers=LAYERS,
              target_layers=DRAFT_LAYERS)
    return {k: make_drafter(k, tmp_path_factory.mktemp(k), **kw)
            for k in ("dflash", "dflash2", "dspark", "muse")}


def stock(path, draft, b, **kw):
    return engine(path, speculative_draft_model_path=draft, speculative_num_draft_tokens=b, **kw)


@pytest.mark.parametrize("kind,blocks", [("dflash", range(2, 17)), ("dflash2", (3, 8, 16)),
                                         ("dspark", (2, 9)), ("muse", (5, 16))])
def test_stock_equals_ar(target, ar_ref, drafters, kind, blocks):
    path, _ = target
    for b in blocks:
        assert run(stock(path, drafters[kind], b, chunked_prefill_size=6)) == ar_ref, (kind, b)


@pytest.mark.parametrize("b", [5, 16])
def test_stock_forcing_checks_every_verify_row(target, ar_ref, drafters, b):
    """Random drafters are rarely accepted, so verify rows 1.. seldom matter; forcing ar's output
    as the drafts commits whole verify blocks (straddling the window edge, and a partial last
    block) and checks the target's argmax at every row."""
    path, _ = target
    checks = stock(path, drafters["dflash"], b, chunked_prefill_size=6).force(prompts(), ar_ref)
    assert [[a for a, _ in c] for c in checks] == ar_ref


def test_transformers_dflash_assistant(target, ar_ref, tmp_path):
    """transformers' DFlash assisted generation with a MuseGlimmerAssistantModel on this target,
    and our `stock` engine loading the same assistant folder: both equal plain greedy."""
    from transformers import MuseGlimmerAssistantModel

    path, ref = target
    draft = make_tiny_assistant(tmp_path / "assistant", target_layer_ids=DRAFT_LAYERS,
                                block_size=8)
    hf = load_hf_target(path)
    assistant = MuseGlimmerAssistantModel.from_pretrained(draft, dtype=torch.float32).eval()
    ps = prompts()
    hf_spec = []
    for p in ps[1:]:  # HF assisted generation runs one sequence at a time
        out = hf.generate(torch.tensor([p]), assistant_model=assistant, speculation_type="dflash",
                          do_sample=False, max_new_tokens=NEW, eos_token_id=None)
        hf_spec.append(out[0, len(p):].tolist())
    assert hf_spec == ref[1:]
    assert run(stock(path, draft, 8, chunked_prefill_size=0)) == ar_ref == ref
