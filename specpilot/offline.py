"""In-process engine without HTTP: for tests, validation and benchmarks.

    eng = OfflineEngine(ServerArgs(model_path=..., device="cpu"))
    outs = eng.generate([[1, 2, 3], [4, 5]], SamplingParams(temperature=0, max_new_tokens=8))

`arrivals` lets a test add requests while others are decoding: request i enters before scheduler
step arrivals[i] (0 = before the first step).
"""

from __future__ import annotations

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
                 forced: Optional[Sequence[list[int]]] = None) -> list[RequestOutput]:
        """Returns the final RequestOutput of each prompt, in order."""
        params = [sampling] * len(prompts) if isinstance(sampling, SamplingParams) else list(sampling)
        arrivals = list(arrivals) if arrivals is not None else [0] * len(prompts)
        rids = [f"offline-{next(self._ids)}" for _ in prompts]
        results: dict[str, RequestOutput] = {}
        self.scheduler.set_output_callback(
            lambda out: results.__setitem__(out.rid, out) if out.finished else None)
        pending = sorted(range(len(prompts)), key=lambda i: arrivals[i])
        step = 0
        while pending or not self.scheduler.is_idle():
            while pending and arrivals[pending[0]] <= step:
                i = pending.pop(0)
                self.scheduler.add_request(GenerateInput(
                    rids[i], list(prompts[i]), params[i],
                    forced_ids=None if forced is None else list(forced[i])))
            self.scheduler.step()
            step += 1
        return [results[r] for r in rids]
