"""The stock engine is lossless: greedy output equals our `ar` engine token for token.

Tiny random Qwen3 target and tiny random drafters in each public layout, fp32 on CPU.
"""

import random

import pytest

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import make_tiny

NEW = 64
GREEDY = SamplingParams(temperature=0, max_new_tokens=NEW, ignore_eos=True)
KINDS = ["dflash", "dflash2", "dspark", "muse"]


def prompts():
    rng = random.Random(7)
    return [[rng.randrange(3, 250) for _ in range(n)] for n in (1, 5, 23, 41)]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    path = make_tiny("qwen3", tmp_path_factory.mktemp("target"))
    ar = OfflineEngine(ServerArgs(model_path=path, device="cpu", max_total_tokens=2048))
    return path, [o.output_ids for o in ar.generate(prompts(), GREEDY)]


@pytest.fixture(scope="module")
def drafters(tmp_path_factory):
    return {k: make_drafter(k, tmp_path_factory.mktemp(k)) for k in KINDS}


def stock(target_path, draft_path, b, **kw):
    return OfflineEngine(ServerArgs(model_path=target_path, device="cpu", max_total_tokens=2048,
                                    speculative_draft_model_path=draft_path,
                                    speculative_num_draft_tokens=b, **kw))


@pytest.mark.parametrize("kind", KINDS)
def test_stock_greedy_equals_ar_every_block_size(target, drafters, kind):
    path, ref = target
    for b in range(2, 17):
        eng = stock(path, drafters[kind], b, chunked_prefill_size=16)
        outs = eng.generate(prompts(), GREEDY)
        assert [o.output_ids for o in outs] == ref, (kind, b)
        assert all(o.meta["spec_verify_ct"] >= 1 for o in outs)
        assert eng.scheduler.alloc.used_tokens == 0


def test_stock_request_as_long_as_the_pool(target, drafters):
    """prompt + max_new_tokens == max_total_tokens (the server's clamp admits it): near the end
    of the pool a verify block needs B slots past the request's tokens. The KV cache's spare
    slots hold them, so stock finishes for length with ar's tokens (it was aborted before)."""
    path, ref = target
    prompt = prompts()[2]
    for b in (4, 16):
        eng = OfflineEngine(ServerArgs(model_path=path, device="cpu", max_running_requests=1,
                                       max_total_tokens=len(prompt) + NEW,
                                       speculative_draft_model_path=drafters["dflash"],
                                       speculative_num_draft_tokens=b))
        out = eng.generate([prompt], GREEDY)[0]
        assert out.finish_reason == {"type": "length", "length": NEW}, (b, out.finish_reason)
        assert out.output_ids == ref[2]
        assert eng.scheduler.alloc.used_tokens == 0
