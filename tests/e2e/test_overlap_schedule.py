"""The overlap scheduler (ar engine, on by default; --disable-overlap-schedule): DECODE step k+1 is queued before step k's
tokens are read, so the host learns one step late that a request ended. Outputs, stop handling,
seeded sampling, arrivals, aborts and KV accounting must be exactly those of the plain scheduler.
"""

import random

import pytest

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.engine.model_runner import PendingTokens
from specpilot.offline import OfflineEngine
from tests.e2e.scheduler_checks import abort_in_flight, count_queued_while_waiting
from tests.e2e.tiny_models import make_tiny


def prompts(n=5, seed=3):
    rng = random.Random(seed)
    return [[rng.randrange(3, 250) for _ in range(rng.randrange(1, 24))] for _ in range(n)]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return make_tiny("llama", tmp_path_factory.mktemp("t"))


def engine(target, overlap, **kw):
    return OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=kw.pop(
        "max_total_tokens", 4096), disable_overlap_schedule=not overlap, **kw))


@pytest.fixture(scope="module")
def engines(target):
    return engine(target, False), engine(target, True)


def run_both(engines, ps, sps, arrivals=None):
    plain, over = engines
    a = plain.generate(ps, sps, arrivals=arrivals)
    b = over.generate(ps, sps, arrivals=arrivals)
    for e in engines:
        assert e.scheduler.is_idle() and e.scheduler.alloc.used_tokens == 0  # nothing leaked
    return a, b


def same(a, b):
    assert [o.output_ids for o in a] == [o.output_ids for o in b]
    assert [o.finish_reason for o in a] == [o.finish_reason for o in b]


def test_greedy_lengths_and_stop_tokens_match(engines):
    ps = prompts()
    ref = engines[0].generate(ps, SamplingParams(temperature=0, max_new_tokens=12,
                                                 ignore_eos=True))
    # different lengths (requests leave the batch at different steps) and stop tokens taken
    # from the reference outputs, so requests end early on a token the host sees one step late
    sps = [SamplingParams(temperature=0, max_new_tokens=m, ignore_eos=True,
                          stop_token_ids=[o.output_ids[k]] if k is not None else [])
           for o, m, k in zip(ref, (12, 3, 9, 1, 12), (5, None, 2, None, None))]
    a, b = run_both(engines, ps, sps)
    same(a, b)
    assert [len(o.output_ids) for o in a][1] == 3 and a[0].finish_reason["type"] == "stop"


def test_seeded_sampling_min_new_tokens_and_penalties_match(engines):
    ps = prompts(6, seed=5)
    sps = [SamplingParams(temperature=0.9, top_k=20, seed=s, max_new_tokens=10,
                          min_new_tokens=4 if s % 2 else 0, ignore_eos=False) for s in range(6)]
    sps[4] = SamplingParams(temperature=0, max_new_tokens=8, repetition_penalty=1.3)  # no overlap
    a, b = run_both(engines, ps, sps)
    same(a, b)


def test_arrivals_mid_decode_match(engines):
    ps = prompts(5, seed=7)
    sp = SamplingParams(temperature=0, max_new_tokens=10, ignore_eos=True)
    a, b = run_both(engines, ps, sp, arrivals=[0, 0, 3, 4, 11])
    same(a, b)


def test_steps_really_overlap(target, monkeypatch):
    eng = engine(target, True)
    order = []
    launch, result = eng.runner.launch_decode, PendingTokens.result
    monkeypatch.setattr(eng.runner, "launch_decode",
                        lambda *a: order.append("launch") or launch(*a))
    monkeypatch.setattr(PendingTokens, "result", lambda self: order.append("read") or result(self))
    eng.generate([[5, 6, 7]], SamplingParams(temperature=0, max_new_tokens=5, ignore_eos=True))
    # prefill gives token 1; decode steps 2..5 are launched each before the previous is read,
    # and the last one needs no successor (its token ends the request by length)
    assert order == ["launch", "launch", "read", "launch", "read", "launch", "read", "read"]


def test_steps_overlap_with_a_queue_at_max_running(target, monkeypatch):
    # requests waiting for a free place (--max-running-requests) do not stop the overlap
    plain, over = engine(target, False, max_running_requests=2), engine(target, True,
                                                                         max_running_requests=2)
    queued = count_queued_while_waiting(over.scheduler, monkeypatch)
    ps = prompts(5, seed=21)
    sp = SamplingParams(temperature=0, max_new_tokens=12, ignore_eos=True)
    a, b = run_both((plain, over), ps, sp)
    same(a, b)
    assert any(queued)


def test_abort_while_a_step_is_in_flight(target, engines):
    ps = prompts(3, seed=9)
    sp = SamplingParams(temperature=0, max_new_tokens=8, ignore_eos=True)
    abort_in_flight(engine(target, True).scheduler, ps, sp, engines[0].generate(ps, sp), 4)


def test_kv_pressure_falls_back_to_plain_steps(target):
    # a pool too small for everyone (40 + 64 spare slots; each request fits in 40): retraction
    # happens in plain steps, outputs unchanged
    ps = prompts(8, seed=11)
    sp = SamplingParams(temperature=0, max_new_tokens=16, ignore_eos=True)
    engines = engine(target, False, max_total_tokens=40), engine(target, True, max_total_tokens=40)
    a, b = run_both(engines, ps, sp)
    same(a, b)
    assert all(e.scheduler.num_retractions > 0 for e in engines)  # the pressure was real


def test_on_by_default(target):
    assert ServerArgs(model_path=target).overlap_schedule
    assert not ServerArgs(model_path=target, disable_overlap_schedule=True).overlap_schedule
    assert ServerArgs(model_path=target, speculative_draft_model_path=target).overlap_schedule
    assert ServerArgs.from_cli(["--model", target]).overlap_schedule
    assert not ServerArgs.from_cli(["--model", target, "--disable-overlap-schedule"]).overlap_schedule
    assert engine(target, True).scheduler.overlap and not engine(target, False).scheduler.overlap


def test_hybrid_target_matches(tmp_path):
    # Gated DeltaNet layers carry recurrent state from step to step: the queued step must read
    # the state its predecessor wrote, and a request's extra step must not leak into the next
    hybrid = make_tiny("qwen3_5", tmp_path / "h")
    ps = prompts(4, seed=17)
    sps = [SamplingParams(temperature=0, max_new_tokens=m, ignore_eos=True) for m in (10, 4, 7, 10)]
    a, b = run_both((engine(hybrid, False), engine(hybrid, True)), ps, sps, arrivals=[0, 0, 2, 6])
    same(a, b)


@pytest.mark.interpreter
def test_graph_path_twin_matches(target):
    # the DECODE graphs' eager twin (Triton interpreter): device input ids go into the buffers
    ps = prompts(3, seed=13)
    sp = SamplingParams(temperature=0, max_new_tokens=9, ignore_eos=True)
    ref = engine(target, False).generate(ps, sp)
    eng = engine(target, True, attention_backend="triton")
    eng.runner.enable_cuda_graphs(max_bs=4, capture=False)
    same(ref, eng.generate(ps, sp))


def prefill_sizes(eng):
    """A list that gets the number of requests of each prefill batch eng schedules."""
    sizes, schedule = [], eng.scheduler._schedule_prefill

    def counted():
        batch = schedule()
        if batch:
            sizes.append(len(batch[0]))
        return batch

    eng.scheduler._schedule_prefill = counted
    return sizes


def test_min_admit_batches_prefills(target):
    # OfflineEngine.generate(min_admit=N): a queue longer than the running limit is started N
    # requests at a time (one prefill batch each), with the outputs of admitting each at once;
    # seeded sampling does not depend on the batch either
    ps = prompts(14, seed=9)
    sps = [SamplingParams(temperature=0, max_new_tokens=m, ignore_eos=True)
           for m in (3, 9, 5, 12, 2, 7, 4, 11, 6, 8, 3, 10, 5, 9)]
    sps[4] = SamplingParams(temperature=0.9, seed=5, max_new_tokens=7, ignore_eos=True)
    for overlap in (False, True):
        eng = engine(target, overlap, max_running_requests=6)
        sizes = prefill_sizes(eng)
        ref = eng.generate(ps, sps)
        one = list(sizes)
        sizes.clear()
        same(ref, eng.generate(ps, sps, min_admit=3))
        assert eng.scheduler.is_idle() and eng.scheduler.alloc.used_tokens == 0
        # the first batch fills the 6 slots, later ones start 3 or more (the last: what is left)
        assert sizes[0] == 6 and all(n >= 3 for n in sizes[1:-1]) and sum(sizes) == 14
        assert len(one) > len(sizes)  # without it, slots are refilled one or two at a time
    with pytest.raises(ValueError, match="min_admit"):
        eng.generate(ps[:1], sps[:1], min_admit=0)
