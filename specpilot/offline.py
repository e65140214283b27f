"""In-process engine without HTTP: for tests, validation and benchmarks.

    eng = OfflineEngine(ServerArgs(model_path=..., device="cpu"))
    outs = eng.generate([[1, 2, 3], [4, 5]], SamplingParams(temperature=0, max_new_tokens=8))

`arrivals` lets a test add requests while others are decoding: request i enters before scheduler
step arrivals[i] (0 = before the first step). `min_admit` N > 1 holds arrived requests back
until N of them (or all that are left) can start at once, so a long queue is prefilled in
batches of at least N instead of one request each time one finishes.
"""

from __future__ import annotations

import bisect
import itertools
from typing import Optional, Sequence

from specpilot.config import ServerArgs
from specpilot.core import GenerateInput, RequestOutput, SamplingParams
from specpilot.build import build_worker
from specpilot.scheduler.scheduler import Scheduler


class OfflineEngine:
    def __init__(self, args: ServerArgs, tokenizer=None):
        self.args = args
        self.worker = build_worker(args)
        self.runner = getattr(self.worker, "runner", self.worker)  # the target's ModelRunner
        self.scheduler = Scheduler(self.worker, tokenizer, args.max_running_requests,
                                   args.chunked_prefill_size, args.max_prefill_tokens,
                                   overlap=args.overlap_schedule)
        self._ids = itertools.count()

    def force(self, prompts: Sequence[list[int]], forced: Sequence[list[int]]) -> list[list]:
        """Token forcing: per prompt, per forced token, (engine argmax, top-2 logit gap) at that
        position, computed along the engine's own decode / verify path."""
        outs = self.generate(prompts, SamplingParams(temperature=0), forced=forced)
        return [o.meta["forced_checks"] for o in outs]

    def generate(self, prompts: Sequence[list[int]], sampling: SamplingParams | Sequence[SamplingParams],
                 arrivals: Optional[Sequence[int]] = None,
                 forced: Optional[Sequence[list[int]]] = None,
                 min_admit: int = 1) -> list[RequestOutput]:
        """Returns the final RequestOutput of each prompt, in order (module doc: arrivals,
        min_admit)."""
        if min_admit < 1:
            raise ValueError(f"min_admit must be >= 1, got {min_admit}")
        params = [sampling] * len(prompts) if isinstance(sampling, SamplingParams) else list(sampling)
        arrivals = list(arrivals) if arrivals is not None else [0] * len(prompts)
        sched = self.scheduler
        rids = [f"offline-{next(self._ids)}" for _ in prompts]
        results: dict[str, RequestOutput] = {}
        sched.set_output_callback(
            lambda out: results.__setitem__(out.rid, out) if out.finished else None)
        order = sorted(range(len(prompts)), key=lambda i: arrivals[i])
        times = [arrivals[i] for i in order]
        head, step = 0, 0  # order[:head] are in the scheduler
        while head < len(order) or not sched.is_idle():
            due = bisect.bisect_right(times, step, lo=head) - head  # arrived, not yet added
            if min_admit > 1:  # only what can start now, and only a batch of min_admit
                room = max(0, sched.max_running - len(sched.running) - len(sched.waiting))
                due = 0 if room < min(min_admit, due) and sched.running else min(due, room)
            for i in order[head:head + due]:
                sched.add_request(GenerateInput(
                    rids[i], list(prompts[i]), params[i],
                    forced_ids=None if forced is None else list(forced[i])))
            head += due
            sched.step()
            step += 1
        return [results[r] for r in rids]
