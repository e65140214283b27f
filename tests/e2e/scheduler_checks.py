"""Checks shared by the overlap-scheduler tests (ar and stock)."""

from specpilot.core import GenerateInput


def abort_in_flight(sched, ps, sp, ref, steps):
    """Requests r0..r2 from ps; after `steps` step() calls a step must be in flight, and r1 is
    aborted: r1 ends as aborted, r0 and r2 give ref's outputs, and no KV is left in use."""
    outs = {}
    sched.set_output_callback(lambda o: outs.__setitem__(o.rid, o) if o.finished else None)
    for i, p in enumerate(ps):
        sched.add_request(GenerateInput(f"r{i}", p, sp))
    for _ in range(steps):
        sched.step()
    assert sched._inflight is not None
    sched.abort("r1")
    while not sched.is_idle():
        sched.step()
    assert outs["r1"].finish_reason["type"] == "abort"
    assert [outs[f"r{i}"].output_ids for i in (0, 2)] == [ref[0].output_ids, ref[2].output_ids]
    assert sched.alloc.used_tokens == 0


def count_queued_while_waiting(sched, monkeypatch) -> list[bool]:
    """Wraps sched._next_overlapped; the list it returns gets, per call, whether a step was
    queued behind an unread one while requests were waiting."""
    queued = []
    nxt = sched._next_overlapped

    def counted(prev):
        out = nxt(prev)
        queued.append(out is not None and bool(sched.waiting))
        return out

    monkeypatch.setattr(sched, "_next_overlapped", counted)
    return queued
