"""Unit tests for specpilot.scheduler.detokenizer with real (offline-trained) HF tokenizers."""

import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from specpilot.scheduler.detokenizer import IncrementalDetokenizer

CORPUS = (["hello world, the quick brown fox jumps over the lazy dog"] * 20
          + ["héllo wörld 日本語 🙂", "日本語のテキスト 🙂🙂 café naïve"])
SAMPLE = "héllo wörld 日本語 🙂 the end, café naïve 🙂🙂 the lazy dog"


@pytest.fixture(scope="module")
def tok():
    """Byte-level BPE with few merges, so multi-byte characters span several tokens."""
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<eos>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    t.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=t, eos_token="<eos>", pad_token="<pad>")


def chunks(ids, rng, max_chunk):
    i = 0
    while i < len(ids):
        n = rng.randint(1, max_chunk)
        yield ids[i:i + n]
        i += n


def run(tok, ids, prompt=(), chunk=1, seed=0, **kw):
    """Feed ids; return (deltas, flush, detok, stop reported by push)."""
    kw.setdefault("skip_special_tokens", True)
    d = IncrementalDetokenizer(tok, list(prompt), kw.pop("skip_special_tokens"),
                               True, kw.pop("stop", []), kw.pop("no_stop_trim", False))
    deltas, stops = [], []
    for part in chunks(ids, random.Random(seed), chunk):
        delta, stop = d.push(part)
        deltas.append(delta)
        if stop is not None:
            stops.append(stop)
    tail = d.flush()
    assert "".join(deltas) + tail == d.text
    return deltas, tail, d, stops


def test_tokenizer_splits_characters(tok):
    ids = tok.encode(SAMPLE)
    assert tok.decode(ids) == SAMPLE
    assert any(tok.decode(ids[:i]).endswith("\ufffd") for i in range(len(ids)))


@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("chunk", [1, 3, 8])
def test_random_ids_concat_equals_decode(tok, skip, chunk):
    rng = random.Random(1234 + chunk)
    prompt = tok.encode("hello world")
    for trial in range(60):
        ids = [rng.randrange(len(tok)) for _ in range(rng.randint(0, 40))]
        deltas, tail, d, _ = run(tok, ids, prompt, chunk, seed=trial, skip_special_tokens=skip)
        assert "".join(deltas) + tail == tok.decode(ids, skip_special_tokens=skip)


@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_real_text_never_emits_broken_utf8(tok, chunk):
    ids = tok.encode(SAMPLE)
    deltas, tail, d, _ = run(tok, ids, tok.encode("say:"), chunk)
    assert "".join(deltas) == SAMPLE and tail == ""
    assert all("\ufffd" not in x for x in deltas)
    emitted = ""
    for x in deltas:
        emitted += x
        assert SAMPLE.startswith(emitted)


def test_text_is_whole_characters_while_streaming(tok):
    ids = tok.encode("日本語🙂")
    d = IncrementalDetokenizer(tok, [], True, True, [], False)
    for i in ids:
        d.push([i])
        assert "\ufffd" not in d.text and "日本語🙂".startswith(d.text)
    assert d.flush() == "" and d.text == "日本語🙂"


def test_unfinished_character_flushed_at_finish(tok):
    ids = tok.encode("ab日")[:-1]  # cut inside 日
    deltas, tail, d, _ = run(tok, ids)
    assert "".join(deltas) == "ab" and tail.startswith("\ufffd")
    assert d.text == tok.decode(ids)


@pytest.mark.parametrize("stop", ["日本", "ld 日本語", "🙂 the", "lazy dog", "é"])
@pytest.mark.parametrize("chunk", [1, 4])
def test_stop_string_trimmed(tok, stop, chunk):
    ids = tok.encode(SAMPLE)
    deltas, tail, d, stops = run(tok, ids, chunk=chunk, stop=[stop, "never-appears"])
    expect = SAMPLE[:SAMPLE.index(stop)]
    assert stops == [stop] and d.matched_stop == stop and d.finished
    assert d.text == expect and "".join(deltas) == expect and tail == ""
    streamed = ""
    for x in deltas:
        streamed += x
        assert stop not in streamed


@pytest.mark.parametrize("chunk", [1, 3])
def test_no_stop_trim_keeps_stop(tok, chunk):
    ids = tok.encode(SAMPLE)
    deltas, tail, d, stops = run(tok, ids, chunk=chunk, stop=["wörld"], no_stop_trim=True)
    assert stops == ["wörld"] and d.text == "héllo wörld" == "".join(deltas) + tail


def test_stop_prefix_held_back_then_released(tok):
    d = IncrementalDetokenizer(tok, [], True, True, ["the end!"], False)
    ids = tok.encode("go the end")
    out = "".join(d.push([i])[0] for i in ids)
    assert out == "go " and d.text == "go the end"  # "the end" could still become the stop
    assert d.flush() == "the end" and d.text == "go the end"


def test_earliest_completing_stop_wins(tok):
    ids = tok.encode("the quick brown fox")
    _, _, d, stops = run(tok, ids, chunk=50, stop=["quick brown", "ick"])
    assert stops == ["ick"] and d.text == "the qu"


def test_push_after_stop_is_ignored(tok):
    d = IncrementalDetokenizer(tok, [], True, True, ["fox"], False)
    assert d.push(tok.encode("the fox")) == ("the ", "fox")
    assert d.push(tok.encode(" jumps")) == ("", None)
    assert d.flush() == "" and d.text == "the "


def test_special_tokens_skipped_or_kept(tok):
    eos = tok.eos_token_id
    ids = tok.encode("hello") + [eos] + tok.encode(" world")
    assert "".join(run(tok, ids)[0]) == "hello world"
    assert "".join(run(tok, ids, skip_special_tokens=False)[0]) == "hello<eos> world"


def test_leading_space_uses_prompt_context():
    """Metaspace decoders drop the space of the first token of a decode; the prompt seed fixes it."""
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Metaspace()
    t.decoder = decoders.Metaspace()
    t.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>"],
                                                       show_progress=False))
    sp = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="<unk>")
    prompt, out = sp.encode("hello"), sp.encode("hello world")[len(sp.encode("hello")):]
    assert sp.decode(out) == "world"  # decoding the completion alone loses the space
    deltas, tail, d, _ = run(sp, out, prompt)
    assert "".join(deltas) + tail == " world"
