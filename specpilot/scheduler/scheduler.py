"""Continuous batching: FCFS admission, chunked prefill, decode, retraction, stop conditions.

CPU only: it hands the engine a WorkerBatch of python ints and gets back one token per request.
One `step()` runs one forward: a prefill batch (EXTEND) when a waiting request can be admitted
under the token budget, the KV budget and --max-running-requests, else a DECODE batch of every
running request. When KV runs out during decode, the newest running request is retracted: its KV
is freed and it goes back to the waiting queue to be prefilled again (prompt + output so far).
With `overlap` (the ar engine; on by default, --disable-overlap-schedule) a DECODE step() queues
the next DECODE on the device before it reads the current one's tokens (see "overlap" below);
the stock engine does the same for greedy steps of its whole-step graph.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
from typing import Callable, Optional

from specpilot.core import ForwardMode, GenerateInput, RequestOutput, StepOutput, WorkerBatch
from specpilot.scheduler.detokenizer import IncrementalDetokenizer
from specpilot.scheduler.kv_alloc import KVAllocator
from specpilot.scheduler.request import Req

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, runner, tokenizer=None, max_running_requests: int = 64,
                 chunked_prefill_size: int = 2048, max_prefill_tokens: int = 16384,
                 overlap: bool = False):
        self.runner = runner  # forward(WorkerBatch) -> list[int]; .info: RunnerInfo
        info = runner.info
        self.tokenizer = tokenizer
        self.context_length = info.context_length
        self.vocab_size = info.vocab_size
        self.eos_token_ids = set(info.eos_token_ids)
        self.max_running = max_running_requests
        self.chunked_prefill_size = chunked_prefill_size
        self.max_prefill_tokens = max_prefill_tokens
        # a request holds at most num_kv_slots tokens; the spare slots give one that long the
        # room for its verify block (decode_len rows)
        self.num_kv_slots = info.num_kv_slots
        self.alloc = KVAllocator(info.num_kv_slots + getattr(info, "kv_spare_slots", 0),
                                 info.num_req_rows)
        self.decode_len = getattr(info, "decode_len", 1)  # KV rows per request per DECODE step
        self.waiting: collections.deque[Req] = collections.deque()
        self.running: list[Req] = []
        self.reqs: dict[str, Req] = {}
        self.num_retractions = 0
        self.spec_totals = {"verify_ct": 0, "correct_drafts": 0, "proposed_drafts": 0}
        self.spec_accept_positions: list[int] = []  # [j] = drafts accepted at block slot j
        self._emit: Callable[[RequestOutput], None] = lambda out: None
        self._tok_times: collections.deque = collections.deque()  # (time, tokens) for throughput
        if overlap and not hasattr(runner, "launch_decode"):
            raise ValueError("the overlap scheduler needs a runner or worker that can launch "
                             "a step without reading it (launch_decode)")
        self.overlap = overlap
        self._inflight: Optional[_InFlight] = None  # overlap: a launched DECODE, tokens unread

    # ---------------------------------------------------------------- inputs
    def set_output_callback(self, fn: Callable[[RequestOutput], None]) -> None:
        self._emit = fn

    def add_request(self, inp: GenerateInput) -> None:
        err = self._check_input(inp)
        if err is not None:
            self._emit(RequestOutput(inp.rid, [], "", True, {"type": "abort", "message": err},
                                     prompt_tokens=len(inp.input_ids), output_ids=[], text="",
                                     error=err))
            return
        sp = inp.sampling
        if inp.forced_ids is not None:  # forcing emits exactly the forced tokens
            sp = dataclasses.replace(sp, max_new_tokens=len(inp.forced_ids), ignore_eos=True,
                                     stop=[], stop_token_ids=[], min_new_tokens=0)
        detok = None
        if self.tokenizer is not None:
            detok = IncrementalDetokenizer(self.tokenizer, inp.input_ids, sp.skip_special_tokens,
                                           sp.spaces_between_special_tokens, sp.stop,
                                           sp.no_stop_trim)
        req = Req(inp.rid, list(inp.input_ids), sp, detok)
        if inp.forced_ids is not None:
            req.forced_ids = list(inp.forced_ids)
        if sp.max_new_tokens == 0:
            req.finish_reason = {"type": "length", "length": 0}
            self._emit_req(req)
            return
        self.reqs[req.rid] = req
        self.waiting.append(req)

    def _check_input(self, inp: GenerateInput) -> Optional[str]:
        n = len(inp.input_ids)
        if inp.rid in self.reqs:
            return f"request id {inp.rid!r} is already running"
        if n == 0:
            return "the prompt is empty"
        if n >= self.context_length:
            return f"the prompt has {n} tokens; the context length is {self.context_length}"
        if n + 1 > self.num_kv_slots:
            return f"the prompt has {n} tokens; the KV cache holds {self.num_kv_slots}"
        bad = [t for t in inp.input_ids if not 0 <= t < self.vocab_size]
        if bad:
            return f"token id {bad[0]} is outside the vocabulary (size {self.vocab_size})"
        return None

    def abort(self, rid: str) -> None:
        req = self.reqs.get(rid)
        if req is None:
            return
        if req in self.running:
            self.running.remove(req)
        else:
            self.waiting.remove(req)
        req.finish_reason = {"type": "abort", "message": "aborted"}
        self._finish(req)

    def abort_all(self, message: str) -> None:
        """Finish every request with an error and return all KV (after an internal failure)."""
        for req in list(self.waiting) + list(self.running):
            req.finish_reason = {"type": "abort", "message": message}
            self._finish(req, error=message)
        self.waiting.clear()
        self.running.clear()

    # ---------------------------------------------------------------- state
    def is_idle(self) -> bool:
        return not self.waiting and not self.running and self._inflight is None

    def stats(self) -> dict:
        """Safe to call from any thread (reads a snapshot; never mutates scheduler state)."""
        now = time.monotonic()
        recent = [(t, n) for t, n in list(self._tok_times) if now - t <= 5.0]
        toks = sum(n for _, n in recent)
        span = (now - recent[0][0]) if recent else 0.0
        return {"num_running": len(self.running), "num_waiting": len(self.waiting),
                "kv_used_tokens": self.alloc.used_tokens,
                "kv_total_tokens": self.num_kv_slots,  # the spare slots not counted
                "num_retractions": self.num_retractions,
                "gen_throughput": toks / span if span > 0 else 0.0,
                **self._spec_stats()}

    def _spec_stats(self) -> dict:
        t = self.spec_totals
        if not t["verify_ct"]:
            return {}
        return {"spec_verify_ct": t["verify_ct"],
                "spec_num_correct_drafts": t["correct_drafts"],
                "spec_num_proposed_drafts": t["proposed_drafts"],
                # tokens per verify step, bonus included (SGLang's avg_spec_accept_length)
                "avg_spec_accept_length": (t["correct_drafts"] + t["verify_ct"]) / t["verify_ct"],
                "spec_accepted_per_position": list(self.spec_accept_positions)}

    # ---------------------------------------------------------------- one step
    def step(self) -> None:
        if self._inflight is not None:
            self._overlap_step()
            return
        batch = self._schedule_prefill()
        mode = ForwardMode.EXTEND
        if batch is None:
            batch, mode = self._schedule_decode(), ForwardMode.DECODE
        if batch is None:
            return
        reqs, prefix_lens, extend_lens = batch
        wb = self._worker_batch(mode, reqs, prefix_lens, extend_lens)
        if mode == ForwardMode.DECODE and self.overlap and wb.forced is None:
            # its tokens are read next step
            self._inflight = self._launch(reqs, lambda: self.runner.launch_decode(wb, None))
            return
        try:
            result = self.runner.forward(wb)
        except Exception as e:
            self._fail(reqs, e)
            return
        self._process(mode, reqs, result)

    def _fail(self, reqs: list[Req], e: Exception) -> None:
        """Keep serving: fail this batch's requests (those not finished already), free their KV."""
        log.exception("forward failed")
        for req in reqs:
            if req.finished:
                continue
            (self.running if req in self.running else self.waiting).remove(req)
            req.finish_reason = {"type": "abort", "message": f"internal error: {e}"}
            self._finish(req, error=f"internal error: {e}")

    # ---------------------------------------------------------------- overlap
    # With the overlap scheduler (ar engine), DECODE step k+1 is queued on the device before step k's
    # tokens are read: its input ids are step k's sampled tokens, still on the device, so the
    # host's work for a step (reading and processing results, scheduling, filling the next
    # step's inputs) runs while the GPU computes. The host learns one step late that a request
    # has finished (a stop token or string); the token its extra step produced is dropped, and
    # its KV slot is freed with the rest of the request's. Prefill, forcing and penalties (which
    # need the previous token on the host) make the scheduler read the step in flight first.
    # A speculative step (stock worker) is queued behind the previous one only for the same
    # requests, greedy and in the whole-step graph; the worker moves its inputs on from the
    # previous step's accepted counts on the device (_next_lagged_spec).

    def _launch(self, reqs: list[Req], start: Callable[[], object]) -> Optional["_InFlight"]:
        try:
            return _InFlight(reqs, start())
        except Exception as e:
            self._fail(reqs, e)
            return None

    def _overlap_step(self) -> None:
        prev, self._inflight = self._inflight, None
        nxt = self._next_overlapped(prev)
        if nxt is not None:
            self._inflight = self._launch(*nxt)
        try:
            result = prev.pending.result()
        except Exception as e:
            self._fail(prev.reqs, e)
            return
        self._process(ForwardMode.DECODE, prev.reqs, result,
                      ahead=set() if nxt is None else set(nxt[0]))

    def _next_overlapped(self, prev: "_InFlight"):
        """(reqs, a function that queues their DECODE step) for the step to queue behind prev,
        or None when the host has to read prev first."""
        head = self.waiting[0] if self.waiting else None
        if head is not None and (head.row is not None or len(self.running) < self.max_running):
            return None  # a prefill is due: it runs after prev's results are in
        # (a queue held back by --max-running-requests waits for a request to end: that shows
        # in prev's results, and the prefill comes one step later)
        if self.decode_len > 1:
            return self._next_lagged_spec(prev)
        # requests whose prev token will end them for length need no further step
        idx = [i for i, r in enumerate(prev.reqs) if not r.finished
               and len(r.output_ids) + 1 < r.sampling.max_new_tokens
               and r.seq_len + 1 < self.context_length]
        reqs = [prev.reqs[i] for i in idx]
        if not reqs or len(reqs) * self.decode_len > self.alloc.slots.available:
            return None
        if any(r.sampling.has_penalties or r.forced_ids is not None for r in reqs):
            return None
        prefix_lens = [r.kv_len for r in reqs]  # prev's slot included: the new token's position
        for r in reqs:
            r.kv_slots.extend(self.alloc.slots.alloc(self.decode_len))
        wb = self._worker_batch(ForwardMode.DECODE, reqs, prefix_lens,
                                [self.decode_len] * len(reqs), lag=1)
        ids = prev.pending.device_tokens(None if len(idx) == len(prev.reqs) else idx)
        return reqs, lambda: self.runner.launch_decode(wb, ids)

    def _next_lagged_spec(self, prev: "_InFlight"):
        """A speculative step behind prev (decode_len = B verify rows): only for the same
        requests, when prev ran in the worker's whole-step graph (greedy), and when every
        request has room for a whole block more within the context length. Not when prev may
        end every one of its requests for length (prev adds at most B tokens to each): a step
        queued behind the last step of a request would be dropped whole. Its anchor is
        prev's bonus token, at a position the host does not know yet: between p + 1 and p + B,
        where p is prev's anchor position (KV slots cover positions < kv_len = p + B). So each
        request gets the slots of positions p + B .. p + 2B - 1 here; _process keeps the B
        positions from the next anchor on and frees the rest."""
        b = self.decode_len
        if not prev.pending.chainable or any(r.finished for r in prev.reqs):
            return None
        if any(r.kv_len + b > self.context_length or r.sampling.has_penalties
               or r.forced_ids is not None
               or len(r.output_ids) + 1 >= r.sampling.max_new_tokens  # prev surely ends it
               for r in prev.reqs):
            return None
        if all(len(r.output_ids) + b >= r.sampling.max_new_tokens for r in prev.reqs):
            return None  # prev may be the last step of every request: read it first
        if len(prev.reqs) * b > self.alloc.slots.available:
            return None
        positions, slots = [], []
        for r in prev.reqs:
            new = self.alloc.slots.alloc(b)
            positions.extend(range(len(r.kv_slots), len(r.kv_slots) + b))
            r.kv_slots.extend(new)
            slots.extend(new)
        reqs = list(prev.reqs)
        return reqs, lambda: self.runner.launch_lagged(prev.pending, positions, slots)

    def _schedule_prefill(self):
        if not self.waiting:
            return None
        chunking = self.chunked_prefill_size > 0
        budget = self.chunked_prefill_size if chunking else self.max_prefill_tokens
        reqs, prefix_lens, extend_lens = [], [], []
        for req in self.waiting:
            # room for the next DECODE step of the running requests, of those taken and of this
            # one (alone, nothing is held back: the pool's spare slots hold its verify block)
            others = len(self.running) + len(reqs)
            reserve = (others + 1) * self.decode_len if others else 0
            remaining = req.seq_len - req.kv_len
            if budget <= 0 or (not chunking and reqs and remaining > budget):
                break
            if req.row is None and len(self.running) + len(reqs) >= self.max_running:
                break
            take = min(remaining, budget) if chunking else remaining
            take = min(take, self.alloc.slots.available - reserve)
            if take <= 0 or (not chunking and take < remaining):
                break
            if req.row is None:
                row = self.alloc.rows.alloc(1)
                if row is None:
                    break
                req.row = row[0]
            prefix_lens.append(req.kv_len)
            extend_lens.append(take)
            req.kv_slots.extend(self.alloc.slots.alloc(take))
            reqs.append(req)
            budget -= take
            if take < remaining:
                break  # FCFS: the partly prefilled request stays at the head
        return (reqs, prefix_lens, extend_lens) if reqs else None

    def _schedule_decode(self):
        need = self.decode_len
        while self.running and self.alloc.slots.available < need * len(self.running):
            partial = next((r for r in self.waiting if r.kv_slots), None)
            if partial is not None:  # a partly prefilled request gives its KV back first
                self._drop(partial)
            elif len(self.running) == 1:
                req = self.running.pop()
                req.finish_reason = {"type": "abort", "message": "the KV cache is full"}
                self._finish(req)
            else:
                self._retract(max(self.running, key=lambda r: r.arrival))
        if not self.running:
            return None
        reqs = list(self.running)
        prefix_lens = [r.kv_len for r in reqs]
        for r in reqs:
            r.kv_slots.extend(self.alloc.slots.alloc(need))
        return reqs, prefix_lens, [need] * len(reqs)

    def _retract(self, req: Req) -> None:
        self.running.remove(req)
        self._drop(req)
        req.retractions += 1
        self.num_retractions += 1
        self.waiting.appendleft(req)
        log.info("retracted request %s (KV full): %d tokens to prefill again", req.rid, req.seq_len)

    def _worker_batch(self, mode, reqs, prefix_lens, extend_lens, lag: int = 0) -> WorkerBatch:
        """lag=1: an overlapped DECODE whose input tokens are still on the device (input_ids is
        left empty); each request has one output token more than the host knows of."""
        input_ids, loc = [], []
        for req, p, e in zip(reqs, prefix_lens, extend_lens):
            if not lag:  # a speculative DECODE sends only the anchor; its drafts fill the rest
                input_ids.extend(req.token_slice(p, p + (1 if mode == ForwardMode.DECODE else e)))
            loc.extend(req.kv_slots[p:p + e])
        histories = None
        if any(r.sampling.has_penalties for r in reqs):
            histories = [(r.input_ids, r.output_ids) for r in reqs]
        banned = [sorted((set() if r.sampling.ignore_eos else self.eos_token_ids)
                         | set(r.sampling.stop_token_ids)) if r.sampling.min_new_tokens else []
                  for r in reqs]
        forced = None
        if any(r.forced_ids is not None for r in reqs):
            n = self.decode_len if mode == ForwardMode.DECODE else 1
            forced = [(r.forced_ids or [])[len(r.output_ids):len(r.output_ids) + n] for r in reqs]
        return WorkerBatch(mode, [r.row for r in reqs], prefix_lens, extend_lens, input_ids, loc,
                           [r.sampling for r in reqs], [len(r.output_ids) + lag for r in reqs],
                           banned, histories, forced)

    # ---------------------------------------------------------------- results
    def _process(self, mode, reqs, result: StepOutput, ahead: frozenset | set = frozenset()) -> None:
        """ahead: the requests with an overlapped step queued behind this one (they keep that
        step's KV slot)."""
        now = time.monotonic()
        produced = 0
        for i, (req, toks) in enumerate(zip(reqs, result.tokens)):
            if req.finished:
                continue  # aborted, or ended one step ago (overlap): this token is dropped
            if req.kv_len < req.seq_len:
                continue  # a prefill chunk that did not reach the end of the prompt
            if mode == ForwardMode.EXTEND:
                self.waiting.remove(req)
                self.running.append(req)
            elif result.num_accepted is not None:
                self._record_spec(req, result.num_accepted[i], result.num_proposed)
            if result.checks is not None:
                req.forced_checks.extend(result.checks[i][:len(toks)])
            for tok in toks:  # a stop inside an accepted run ends the request at that token
                produced += 1
                self._append_token(req, tok, now)
                if req.finished:
                    break
            if req.finished:
                self.running.remove(req)
                self._finish(req)
            else:
                # rollback by length: KV keeps positions < seq_len - 1 (rejected rows go back),
                # and the slot of an overlapped step queued behind this one
                keep = req.seq_len - 1 + (self.decode_len if req in ahead else 0)
                self.alloc.slots.free(req.kv_slots[keep:])
                del req.kv_slots[keep:]
                self._emit_req(req)
        if produced:
            self._tok_times.append((now, produced))
            while now - self._tok_times[0][0] > 5.0:
                self._tok_times.popleft()

    def _record_spec(self, req: Req, accepted: int, proposed: int) -> None:
        req.spec.record(accepted, proposed)
        t = self.spec_totals
        t["verify_ct"] += 1
        t["correct_drafts"] += accepted
        t["proposed_drafts"] += proposed
        if len(self.spec_accept_positions) < proposed:
            self.spec_accept_positions.extend([0] * (proposed - len(self.spec_accept_positions)))
        for j in range(accepted):
            self.spec_accept_positions[j] += 1

    def _append_token(self, req: Req, tok: int, now: float) -> None:
        sp = req.sampling
        req.output_ids.append(tok)
        req.pending_ids.append(tok)
        if req.first_token_time is None:
            req.first_token_time = now
        n = len(req.output_ids)
        is_stop_token = (tok in self.eos_token_ids and not sp.ignore_eos) or tok in sp.stop_token_ids
        if is_stop_token:  # the sampler bans these while n <= min_new_tokens
            req.finish_reason = {"type": "stop", "matched": tok}
            if sp.no_stop_trim and req.detok is not None:
                req.pending_text += req.detok.push([tok])[0]
            return
        if req.detok is not None:
            delta, matched = req.detok.push([tok])
            req.pending_text += delta
            if matched is not None:
                req.finish_reason = {"type": "stop", "matched": matched}
                return
        if n >= sp.max_new_tokens or req.seq_len >= self.context_length:
            req.finish_reason = {"type": "length", "length": n}

    def _drop(self, req: Req) -> None:
        """Return the request's KV slots and table row to the pool."""
        self.alloc.slots.free(req.kv_slots)
        req.kv_slots = []
        if req.row is not None:
            self.alloc.rows.free([req.row])
            req.row = None

    def _finish(self, req: Req, error: Optional[str] = None) -> None:
        self._drop(req)
        self.reqs.pop(req.rid, None)
        if req.detok is not None:
            req.pending_text += req.detok.flush()
        self._emit_req(req, error)

    def _emit_req(self, req: Req, error: Optional[str] = None) -> None:
        done = req.finished
        out = RequestOutput(
            req.rid, req.pending_ids, req.pending_text, done, req.finish_reason,
            prompt_tokens=len(req.input_ids), completion_tokens=len(req.output_ids),
            output_ids=list(req.output_ids) if done else None,
            text=(req.detok.text if req.detok is not None else "") if done else None, error=error,
            meta={"total_retractions": req.retractions, **req.spec.meta(len(req.output_ids)),
                  **({"forced_checks": req.forced_checks} if done and req.forced_ids else {})})
        req.pending_ids, req.pending_text = [], ""
        self._emit(out)


@dataclasses.dataclass
class _InFlight:
    """An overlapped DECODE: its requests and their tokens, still on their way to the host."""

    reqs: list[Req]
    pending: object  # engine.model_runner.PendingTokens
