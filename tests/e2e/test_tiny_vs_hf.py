"""Greedy output of our `ar` engine equals transformers `generate`, token for token (fp32, CPU)."""

import random

import pytest

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.engine.model_runner import SPARE_KV_SLOTS
from specpilot.offline import OfflineEngine
from tests.e2e.tiny_models import hf_greedy, make_tiny

NEW = 24


def prompts(n=6, seed=0):
    rng = random.Random(seed)
    lens = [1, 3, 17, 40, 7, 70][:n]
    return [[rng.randrange(3, 256) for _ in range(k)] for k in lens]


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def tiny(request, tmp_path_factory):
    path = make_tiny(request.param, tmp_path_factory.mktemp(request.param))
    return path, hf_greedy(path, prompts(), NEW)


def engine(path, **kw):
    args = ServerArgs(model_path=path, device="cpu", dtype="float32", max_total_tokens=4096,
                      **kw)
    return OfflineEngine(args)


GREEDY = SamplingParams(temperature=0, max_new_tokens=NEW, ignore_eos=True)


@pytest.mark.parametrize("chunk", [0, 16, 5])
def test_batch_matches_hf(tiny, chunk):
    path, ref = tiny
    outs = engine(path, chunked_prefill_size=chunk).generate(prompts(), GREEDY)
    assert [o.output_ids for o in outs] == ref
    assert all(o.finish_reason == {"type": "length", "length": NEW} for o in outs)


def test_arrivals_while_decoding(tiny):
    path, ref = tiny
    outs = engine(path, chunked_prefill_size=8).generate(prompts(), GREEDY,
                                                         arrivals=[0, 0, 3, 5, 9, 20])
    assert [o.output_ids for o in outs] == ref


def test_retraction_when_kv_runs_out(tiny):
    path, ref = tiny
    # 6 requests need up to ~94 slots each; 200 slots (the spare ones included) force
    # retractions during decode.
    eng2 = OfflineEngine(ServerArgs(model_path=path, device="cpu", dtype="float32",
                                    max_total_tokens=200 - SPARE_KV_SLOTS, chunked_prefill_size=32))
    outs = eng2.generate(prompts(), GREEDY)
    assert [o.output_ids for o in outs] == ref
    assert eng2.scheduler.num_retractions > 0
    assert eng2.scheduler.alloc.used_tokens == 0


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_partial_rotary_factor_ignored_as_transformers_does(kind, tmp_path):
    """Llama's and Qwen3's default RoPE rotates the whole head whatever partial_rotary_factor
    says (only Qwen3.5 reads it): the same greedy tokens as transformers (a partial rotation
    here diverged at the first token); with another RoPE type (which transformers cannot run
    with a partial factor) the config is refused."""
    rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    path = make_tiny(kind, tmp_path / "a", rope_parameters=rope)
    ps = prompts(4)
    assert [o.output_ids for o in engine(path).generate(ps, GREEDY)] == hf_greedy(path, ps, NEW)
    path = make_tiny(kind, tmp_path / "b", rope_parameters=dict(rope, rope_type="linear",
                                                                 factor=2.0))
    with pytest.raises(ValueError, match="partial_rotary_factor with RoPE type 'linear'"):
        engine(path)
