"""Scheduler logic with a fake engine: stops, limits, aborts, budgets, KV accounting."""

from types import SimpleNamespace

import pytest

from specpilot.core import ForwardMode, GenerateInput, SamplingParams, StepOutput
from specpilot.scheduler.scheduler import Scheduler

V = 100


class CountingRunner:
    """Next token = (last input token of the request + 1) % V; records every batch."""

    def __init__(self, slots=1000, rows=10, ctx=64, eos=(99,)):
        self.info = SimpleNamespace(context_length=ctx, vocab_size=V, eos_token_ids=eos,
                                    num_kv_slots=slots, num_req_rows=rows)
        self.batches = []

    def forward(self, wb):
        self.batches.append(wb)
        ends, out = 0, []
        for e in wb.extend_lens:
            ends += e
            out.append([(wb.input_ids[ends - 1] + 1) % V])
        return StepOutput(out)


def run(sched, inputs):
    outs = {}
    sched.set_output_callback(lambda o: outs.setdefault(o.rid, []).append(o))
    for inp in inputs:
        sched.add_request(inp)
    while not sched.is_idle():
        sched.step()
    return outs


def greedy(**kw):
    return SamplingParams(temperature=0, **kw)


def test_max_new_tokens_and_kv_freed():
    s = Scheduler(CountingRunner())
    outs = run(s, [GenerateInput("a", [5, 6], greedy(max_new_tokens=4))])
    final = outs["a"][-1]
    assert final.finished and final.output_ids == [7, 8, 9, 10]
    assert final.finish_reason == {"type": "length", "length": 4}
    assert [t for o in outs["a"] for t in o.new_token_ids] == [7, 8, 9, 10]
    assert s.alloc.used_tokens == 0 and s.alloc.rows.available == 10


def test_eos_and_stop_token_ids_and_ignore_eos():
    s = Scheduler(CountingRunner())
    outs = run(s, [GenerateInput("eos", [96], greedy(max_new_tokens=10)),
                   GenerateInput("stop", [10], greedy(max_new_tokens=10, stop_token_ids=[13])),
                   GenerateInput("ign", [96], greedy(max_new_tokens=5, ignore_eos=True))])
    assert outs["eos"][-1].output_ids == [97, 98, 99]
    assert outs["eos"][-1].finish_reason == {"type": "stop", "matched": 99}
    assert outs["stop"][-1].output_ids == [11, 12, 13]
    assert outs["ign"][-1].output_ids == [97, 98, 99, 0, 1]


def test_context_limit():
    s = Scheduler(CountingRunner(ctx=8))
    outs = run(s, [GenerateInput("a", [1, 2, 3, 4, 5], greedy(max_new_tokens=100))])
    final = outs["a"][-1]
    assert len(final.output_ids) == 3 and final.finish_reason["type"] == "length"


@pytest.mark.parametrize("ids,msg", [([], "empty"), (list(range(64)), "context length"),
                                     ([1, 200], "vocabulary")])
def test_rejected_inputs(ids, msg):
    s = Scheduler(CountingRunner())
    outs = run(s, [GenerateInput("a", ids, greedy())])
    assert outs["a"][-1].error and msg in outs["a"][-1].error
    assert s.is_idle()


def test_zero_new_tokens():
    s = Scheduler(CountingRunner())
    outs = run(s, [GenerateInput("a", [1, 2], greedy(max_new_tokens=0))])
    assert outs["a"][-1].output_ids == [] and outs["a"][-1].finished
    assert not s.runner.batches


def test_abort_frees_kv():
    s = Scheduler(CountingRunner())
    outs = {}
    s.set_output_callback(lambda o: outs.setdefault(o.rid, []).append(o))
    s.add_request(GenerateInput("a", [1, 2, 3], greedy(max_new_tokens=50)))
    s.add_request(GenerateInput("b", [4] * 30, greedy(max_new_tokens=50)))
    for _ in range(3):
        s.step()
    assert s.alloc.used_tokens > 0
    s.abort("a")
    s.abort("b")
    assert s.is_idle() and s.alloc.used_tokens == 0 and s.alloc.rows.available == 10
    assert outs["a"][-1].finish_reason["type"] == "abort"


def test_chunked_prefill_budget_and_fcfs():
    r = CountingRunner()
    s = Scheduler(r, chunked_prefill_size=8)
    run(s, [GenerateInput("a", list(range(20)), greedy(max_new_tokens=2)),
            GenerateInput("b", list(range(5)), greedy(max_new_tokens=2))])
    extends = [b for b in r.batches if b.mode == ForwardMode.EXTEND]
    assert [b.extend_lens for b in extends] == [[8], [8], [4, 4], [1]]
    assert extends[2].prefix_lens == [16, 0]


def test_max_running_requests():
    r = CountingRunner()
    s = Scheduler(r, max_running_requests=2)
    run(s, [GenerateInput(str(i), [i + 1], greedy(max_new_tokens=3)) for i in range(5)])
    assert max(b.batch_size for b in r.batches) == 2


def test_retraction_recomputes_and_finishes():
    r = CountingRunner(slots=12)
    s = Scheduler(r)
    outs = run(s, [GenerateInput(str(i), [i * 10, i * 10 + 1], greedy(max_new_tokens=6))
                   for i in range(3)])
    assert s.num_retractions > 0
    for i in range(3):
        assert outs[str(i)][-1].output_ids == [i * 10 + k for k in range(2, 8)]
    assert s.alloc.used_tokens == 0


class SpecRunner(CountingRunner):
    """A speculative engine whose drafts are all rejected: each DECODE step writes B KV rows per
    request (the anchor and B - 1 drafts) and yields one token."""

    def __init__(self, b, spare, **kw):
        super().__init__(**kw)
        self.info.decode_len, self.info.kv_spare_slots = b, spare

    def forward(self, wb):
        if wb.mode != ForwardMode.DECODE:
            return super().forward(wb)
        self.batches.append(wb)
        n = wb.batch_size
        return StepOutput([[(t + 1) % V] for t in wb.input_ids], num_accepted=[0] * n,
                          num_proposed=self.info.decode_len - 1)


@pytest.mark.parametrize("b", [2, 8, 16])
def test_spec_request_as_long_as_the_pool_finishes(b):
    # prompt + max_new_tokens == the pool (what the server's clamp admits); the last steps need
    # B slots past the request's tokens: the spare slots hold them, nothing is aborted or lost
    r = SpecRunner(b, spare=16, slots=40, ctx=64)
    s = Scheduler(r, max_running_requests=1)
    outs = run(s, [GenerateInput("a", [1] * 10, greedy(max_new_tokens=30, ignore_eos=True))])
    final = outs["a"][-1]
    assert final.finish_reason == {"type": "length", "length": 30}
    assert final.output_ids == [k % V for k in range(2, 32)]
    assert max(len(wb.req_pool_indices) for wb in r.batches) == 1
    assert s.alloc.used_tokens == 0 and s.alloc.slots.capacity == 56
    # a prompt longer than the pool is refused against num_kv_slots, not the spare
    outs = run(s, [GenerateInput("b", [1] * 40, greedy())])
    assert "the KV cache holds 40" in outs["b"][-1].error


def test_spec_prefill_leaves_room_for_every_verify_block():
    # a request is admitted only where the next DECODE step of all (B slots each) still fits:
    # otherwise it would be prefilled, retracted at once and prefilled again
    r = SpecRunner(8, spare=8, slots=30, ctx=64)
    s = Scheduler(r)
    outs = {}
    s.set_output_callback(lambda o: outs.setdefault(o.rid, []).append(o))
    s.add_request(GenerateInput("a", [1] * 10, greedy(max_new_tokens=12, ignore_eos=True)))
    s.step()
    s.add_request(GenerateInput("b", [2] * 16, greedy(max_new_tokens=4, ignore_eos=True)))
    while not s.is_idle():
        s.step()
    assert s.num_retractions == 0
    assert outs["a"][-1].output_ids == [k % V for k in range(2, 14)]
    assert outs["b"][-1].output_ids == [3, 4, 5, 6]
    assert s.alloc.used_tokens == 0


def test_forward_failure_frees_and_forgets_the_batch():
    r = CountingRunner()
    calls = {"n": 0}
    original = r.forward

    def flaky(wb):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("boom")
        return original(wb)

    r.forward = flaky
    s = Scheduler(r)
    outs = run(s, [GenerateInput("a", [1, 2], greedy(max_new_tokens=8))])
    assert outs["a"][-1].error == "internal error: boom"
    assert s.is_idle() and s.alloc.used_tokens == 0 and s.alloc.rows.available == 10
