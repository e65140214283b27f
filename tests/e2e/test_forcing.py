"""Token forcing along each engine's own path: ar's greedy output forced through ar and stock
agrees at every position; the checks see a position where an engine is wrong."""

import pytest

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import make_tiny

PROMPTS = [[5, 6, 7], [100] * 9]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    target = make_tiny("qwen3", tmp_path_factory.mktemp("t"))
    drafter = make_drafter("dflash2", tmp_path_factory.mktemp("d"))
    ar = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=1024))
    ref = [o.output_ids for o in ar.generate(PROMPTS, SamplingParams(
        temperature=0, max_new_tokens=30, ignore_eos=True))]
    stock = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=1024,
                                     speculative_draft_model_path=drafter,
                                     speculative_num_draft_tokens=4))
    return ar, stock, ref


@pytest.mark.parametrize("which", ["ar", "stock"])
def test_forcing_agrees(setup, which):
    ar, stock, ref = setup
    eng = ar if which == "ar" else stock
    checks = eng.force(PROMPTS, ref)
    for c, r in zip(checks, ref):
        assert len(c) == len(r)
        assert [a for a, _ in c] == r
        assert all(gap >= 0 for _, gap in c)
    assert eng.scheduler.alloc.used_tokens == 0


def test_forcing_sees_a_wrong_token(setup):
    ar, _, ref = setup
    bad = [list(r) for r in ref]
    bad[0][10] = (bad[0][10] + 1) % 256  # force a token ar would not pick
    checks = ar.force(PROMPTS, bad)
    assert checks[0][10][0] == ref[0][10] != bad[0][10]
