"""Hybrid Gated DeltaNet target (qwen3_5): equal to transformers, stock == ar, state commit."""

import random

import pytest
import torch

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import hf_greedy, make_tiny

NEW = 64
GREEDY = SamplingParams(temperature=0, max_new_tokens=NEW, ignore_eos=True)


def prompts():
    rng = random.Random(3)
    return [[rng.randrange(3, 250) for _ in range(n)] for n in (1, 6, 19, 44)]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    path = make_tiny("qwen3_5", tmp_path_factory.mktemp("q35"))
    return path, hf_greedy(path, prompts(), NEW)


@pytest.mark.parametrize("chunk", [0, 7])
def test_matches_transformers(target, chunk):
    path, ref = target
    eng = OfflineEngine(ServerArgs(model_path=path, device="cpu", max_total_tokens=2048,
                                   chunked_prefill_size=chunk))
    assert [o.output_ids for o in eng.generate(prompts(), GREEDY)] == ref
    assert [o.output_ids for o in eng.generate(prompts(), GREEDY, arrivals=[0, 2, 5, 9])] == ref


# The tensorised path (batched conv + the Triton recurrence, TensorRecurrentBatch) runs on the
# Triton interpreter here, which is slow: fewer new tokens, compared with the same reference.
SHORT = SamplingParams(temperature=0, max_new_tokens=16, ignore_eos=True)


@pytest.mark.interpreter
def test_tensorised_matches_transformers(target):
    path, ref = target
    eng = OfflineEngine(ServerArgs(model_path=path, device="cpu", max_total_tokens=2048,
                                   chunked_prefill_size=7, attention_backend="triton"))
    got = [o.output_ids for o in eng.generate(prompts(), SHORT, arrivals=[0, 2, 5, 9])]
    assert got == [r[:16] for r in ref]


@pytest.mark.parametrize("kind", ["dflash", "dflash2", "dspark", "muse"])
def test_stock_equals_ar(target, kind, tmp_path):
    path, ref = target
    draft = make_drafter(kind, tmp_path, target_layers=(1, 5), num_target_layers=8)
    for b in ([2, 3, 5, 8, 11, 16] if kind == "dflash" else [4, 9]):
        eng = OfflineEngine(ServerArgs(model_path=path, device="cpu", max_total_tokens=2048,
                                       speculative_draft_model_path=draft,
                                       speculative_num_draft_tokens=b, chunked_prefill_size=9))
        assert [o.output_ids for o in eng.generate(prompts(), GREEDY)] == ref, (kind, b)


@pytest.mark.interpreter
def test_stock_equals_ar_tensorised(target, tmp_path):
    """The tensorised recurrent path under VERIFY (stash, one-launch commit): block 16 eager,
    block 3 through the whole-step CUDA-graph twin (StockStepGraphs: the commit from device
    counts of the padded bucket, padding requests included). Block sizes 2-16 on this target
    are covered by the reference path above."""
    path, ref = target
    draft = make_drafter("dflash", tmp_path, target_layers=(1, 5), num_target_layers=8)
    for b, graphs in ((3, True), (16, False)):
        eng = OfflineEngine(ServerArgs(model_path=path, device="cpu", max_total_tokens=2048,
                                       speculative_draft_model_path=draft,
                                       speculative_num_draft_tokens=b, chunked_prefill_size=9,
                                       attention_backend="triton"))
        calls = []
        if graphs:  # 3 requests run in bucket 4: one padding request
            eng.worker.enable_cuda_graphs(max_bs=4, capture=False)
            run = eng.worker.step_graphs.run
            eng.worker.step_graphs.run = lambda *a: calls.append(len(a[0])) or run(*a)
        got = [o.output_ids for o in eng.generate(prompts()[1:], SHORT)]
        assert got == [r[:16] for r in ref[1:]], (b, graphs)
        assert (3 in calls) == graphs
        assert eng.scheduler.alloc.used_tokens == 0


@pytest.mark.interpreter
def test_ar_decode_graph_twin(target):
    path, ref = target
    eng = OfflineEngine(ServerArgs(model_path=path, device="cpu", max_total_tokens=2048,
                                   attention_backend="triton"))
    eng.runner.enable_cuda_graphs(max_bs=4, capture=False)  # 3 requests: bucket 4, 1 padding
    calls = []
    run = eng.runner.graphs.run
    eng.runner.graphs.run = lambda *a: calls.append(len(a[0])) or run(*a)
    got = [o.output_ids for o in eng.generate(prompts()[:3], SHORT)]
    assert got == [r[:16] for r in ref[:3]] and 3 in calls


@pytest.mark.parametrize("backend", ["torch", pytest.param("triton", marks=pytest.mark.interpreter)])
def test_state_commit_equals_running_accepted_rows(target, backend):
    """A verify over B rows that is rejected at position a leaves the recurrent state equal to
    running only the a+1 accepted rows, for every a."""
    path, _ = target
    eng = OfflineEngine(ServerArgs(model_path=path, device="cpu", max_total_tokens=512,
                                   attention_backend=backend))
    rn = eng.runner
    prompt, block = [5, 9, 13, 17, 21], [30, 31, 32, 33, 34, 35]
    b = len(block)
    worst = 0.0
    for a in range(b):
        # committed state after prompt + block[:a+1], step by step (decode path)
        rn.run_target([0], [0], [len(prompt)], rn.tensor(prompt), rn.tensor(list(range(1, 6))))
        for j in range(a + 1):
            p = len(prompt) + j
            rn.run_target([0], [p], [1], rn.tensor([block[j]]), rn.tensor([p + 1]))
        want = (rn.states.conv[:, 0].clone(), rn.states.rec[:, 0].clone())
        # prompt, then one verify over all B rows, committed at a
        rn.run_target([0], [0], [len(prompt)], rn.tensor(prompt), rn.tensor(list(range(1, 6))))
        before = rn.states.rec[:, 0].clone()
        rn.run_target([0], [len(prompt)], [b], rn.tensor(block),
                      rn.tensor(list(range(6, 6 + b))), verify=True)
        assert torch.equal(rn.states.rec[:, 0], before)  # verify alone never advances state
        rn.commit_verify([a])
        worst = max(worst, (rn.states.conv[:, 0] - want[0]).abs().max().item(),
                    (rn.states.rec[:, 0] - want[1]).abs().max().item())
    assert worst < 1e-5, worst
