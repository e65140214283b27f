"""The stock engine with the overlap scheduler (the default; --disable-overlap-schedule turns it
off): greedy step k+1 is queued, in the whole-step graph, before step k's accepted counts reach the
host; the worker moves its anchors, positions and KV slots on from them on the device
(StockStepGraphs.advance). Outputs, stop handling, step counts and KV accounting must be exactly
those of the plain scheduler. Run as the graphs' eager twin on CPU (Triton interpreter), like
tests/e2e/test_graph_path.py; the GPU run with captured graphs is scripts/gpu_graph_check.py."""

import random

import pytest

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from tests.e2e.scheduler_checks import abort_in_flight, count_queued_while_waiting
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import make_tiny

pytestmark = pytest.mark.interpreter


def prompts(n=3, seed=11):
    rng = random.Random(seed)
    return [[rng.randrange(3, 250) for _ in range(rng.randrange(1, 30))] for _ in range(n)]


def stock(target, drafter, overlap, **kw):
    eng = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=kw.pop(
        "max_total_tokens", 1024), attention_backend="triton",
        speculative_draft_model_path=drafter, speculative_num_draft_tokens=4,
        disable_overlap_schedule=not overlap, **kw))
    eng.worker.enable_cuda_graphs(max_bs=4, capture=False)
    return eng


def count_lagged(eng):
    calls = []
    lagged = eng.worker.launch_lagged
    eng.worker.launch_lagged = lambda *a: calls.append(1) or lagged(*a)
    return calls


def run_pair(plain, over, ps, sps, arrivals=None):
    a = plain.generate(ps, sps, arrivals=arrivals)
    b = over.generate(ps, sps, arrivals=arrivals)
    for e in (plain, over):
        assert e.scheduler.is_idle() and e.scheduler.alloc.used_tokens == 0  # nothing leaked
    assert [o.output_ids for o in a] == [o.output_ids for o in b]
    assert [o.finish_reason for o in a] == [o.finish_reason for o in b]
    return a, b


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    target = make_tiny("qwen3", tmp_path_factory.mktemp("target"))
    drafter = make_drafter("dflash", tmp_path_factory.mktemp("drafter"))
    return target, drafter, stock(target, drafter, False), stock(target, drafter, True)


def test_greedy_lengths_stops_and_steps_match(dense):
    target, drafter, plain, over = dense
    ps = prompts()
    ref = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=1024)).generate(
        ps, SamplingParams(temperature=0, max_new_tokens=20, ignore_eos=True))
    # lengths that end inside a block, and stop tokens from the reference outputs, which the
    # host sees one step late (the step queued behind is dropped)
    sps = [SamplingParams(temperature=0, max_new_tokens=m, ignore_eos=True,
                          stop_token_ids=[ref[i].output_ids[k]] if k is not None else [])
           for i, (m, k) in enumerate(((20, None), (7, None), (20, 9)))]
    lagged = count_lagged(over)
    a, b = run_pair(plain, over, ps, sps)
    assert lagged  # steps really were queued behind unread ones
    assert a[0].output_ids == ref[0].output_ids and len(a[1].output_ids) == 7
    assert a[2].finish_reason["type"] == "stop"
    # the same verify steps: the queued steps continue exactly where the read ones would
    assert [o.meta["spec_verify_ct"] for o in a] == [o.meta["spec_verify_ct"] for o in b]


def test_no_step_queued_behind_a_possible_last_one(dense, monkeypatch):
    # a lone request that ends for length: no step is queued behind one that may add its last
    # tokens (a step adds at most B), so every launched step is a verify step that counts.
    # Simulated acceptance makes steps add several tokens, so the last step is not foreseeable
    target, drafter, _, _ = dense
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "3.5")
    plain, over = stock(target, drafter, False), stock(target, drafter, True)
    launched = count_lagged(over)
    decode = over.worker.launch_decode
    over.worker.launch_decode = lambda *a, **k: launched.append(0) or decode(*a, **k)
    for m in (23, 30, 41):
        launched.clear()
        sp = SamplingParams(temperature=0, max_new_tokens=m, ignore_eos=True)
        a, b = run_pair(plain, over, prompts(1, seed=m), sp)
        assert sum(launched) > 0  # some steps were still queued behind unread ones
        assert len(launched) == b[0].meta["spec_verify_ct"] == a[0].meta["spec_verify_ct"]


def test_arrivals_sampling_and_abort(dense):
    _, _, plain, over = dense
    ps = prompts(4, seed=5)
    greedy = SamplingParams(temperature=0, max_new_tokens=14, ignore_eos=True)
    run_pair(plain, over, ps, greedy, arrivals=[0, 0, 2, 5])
    # a sampled request makes the steps it is in plain ones (no whole-step graph)
    sampled = SamplingParams(temperature=0.8, seed=3, max_new_tokens=10, ignore_eos=True)
    run_pair(plain, over, ps[:3], [greedy, sampled, greedy])
    # an abort while a step is in flight: the others finish as without it, nothing leaks
    # (prefill, then 2 decode steps: the second queued behind the first)
    abort_in_flight(over.scheduler, ps[:3], greedy, plain.generate(ps[:3], greedy), 3)


def test_queue_at_max_running(dense, monkeypatch):
    # requests waiting for a free place (--max-running-requests 2) do not stop the lagged steps;
    # each is admitted one step after a request ends, with the same outputs and verify steps
    target, drafter, _, _ = dense
    plain = stock(target, drafter, False, max_running_requests=2)
    over = stock(target, drafter, True, max_running_requests=2)
    queued = count_queued_while_waiting(over.scheduler, monkeypatch)
    sp = SamplingParams(temperature=0, max_new_tokens=12, ignore_eos=True)
    a, b = run_pair(plain, over, prompts(5, seed=13), sp)
    assert any(queued)
    assert [o.meta["spec_verify_ct"] for o in a] == [o.meta["spec_verify_ct"] for o in b]


def test_context_limit_and_kv_pressure(tmp_path):
    target = make_tiny("qwen3", tmp_path / "t")
    drafter = make_drafter("dflash", tmp_path / "d")
    ps = prompts(3, seed=7)
    sp = SamplingParams(temperature=0, max_new_tokens=30, ignore_eos=True)
    # requests that run into the context length (no queued step may pass it) ...
    kw = dict(context_length=48)
    run_pair(stock(target, drafter, False, **kw), stock(target, drafter, True, **kw), ps, sp)
    # ... and a KV pool too small for all (60 + 64 spare slots; each request fits in 60):
    # retraction happens in plain steps
    kw = dict(max_total_tokens=60)
    a = stock(target, drafter, False, **kw)
    b = stock(target, drafter, True, **kw)
    run_pair(a, b, prompts(6, seed=7), sp)
    assert b.scheduler.num_retractions > 0


def test_hybrid_target_matches(tmp_path):
    # Gated DeltaNet state is committed inside the step graph from the device accept counts:
    # the queued step must start from the state its predecessor committed
    target = make_tiny("qwen3_5", tmp_path / "h")
    drafter = make_drafter("dflash", tmp_path / "d", target_layers=(1, 5), num_target_layers=8)
    sps = [SamplingParams(temperature=0, max_new_tokens=m, ignore_eos=True) for m in (16, 5, 11)]
    over = stock(target, drafter, True)
    lagged = count_lagged(over)
    run_pair(stock(target, drafter, False), over, prompts(3, seed=17), sps, arrivals=[0, 0, 3])
    assert lagged


def test_simulated_acceptance_matches(dense, monkeypatch):
    target, drafter, _, _ = dense
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "2.5")
    sp = SamplingParams(temperature=0, max_new_tokens=16, ignore_eos=True)
    over = stock(target, drafter, True)
    lagged = count_lagged(over)
    a, b = run_pair(stock(target, drafter, False), over, prompts(), sp)
    assert lagged and [o.meta["spec_verify_ct"] for o in a] == [o.meta["spec_verify_ct"]
                                                               for o in b]
    # fixed token mode: the host emits filler ids, so the queued step's anchor is the filler
    # too (the plain path's next anchor); the same filler outputs and the same step counts
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_TOKEN_MODE", "fixed")
    plain, over = stock(target, drafter, False), stock(target, drafter, True)
    anchors = []
    advance = over.worker.step_graphs.advance
    over.worker.step_graphs.advance = lambda out: advance(out) or anchors.append(
        over.worker.step_graphs.draft.block[:out.shape[0], 0].tolist())
    a, b = run_pair(plain, over, prompts(), sp)
    assert anchors and all(t == over.worker.simulate.filler_id for row in anchors for t in row)
    assert [o.meta["spec_verify_ct"] for o in a] == [o.meta["spec_verify_ct"] for o in b]


def test_flag_checks(dense):
    target, drafter, _, over = dense
    assert over.scheduler.overlap
    assert ServerArgs(model_path=target, speculative_draft_model_path=drafter).overlap_schedule
    assert not ServerArgs(model_path=target, speculative_draft_model_path=drafter,
                          disable_overlap_schedule=True).overlap_schedule
    assert ServerArgs.from_cli(["--model", target, "--speculative-draft-model-path", drafter]
                               ).overlap_schedule
