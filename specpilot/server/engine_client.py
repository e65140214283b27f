"""Bridge between the asyncio HTTP front end and the scheduler thread that owns the GPU.

The scheduler runs in one background thread (`SchedulerLoop`). The front end calls `submit`, which
returns an asyncio.Queue that receives one `RequestOutput` per step in which the request made
progress; the last one has `finished=True`. `abort(rid)` frees the request's KV (client gone).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from typing import Callable, Optional

from specpilot.core import AbortInput, GenerateInput, RequestOutput

log = logging.getLogger(__name__)


class EngineClient:
    def __init__(self, scheduler, tokenizer, model_info: dict):
        self.scheduler = scheduler
        self.tokenizer = tokenizer  # HF tokenizer, or None with --skip-tokenizer-init
        self.model_info = model_info  # context_length, vocab_size, eos_token_ids, model_path ...
        self._inbox: "queue.Queue" = queue.Queue()
        self._queues: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.on_output: Optional[Callable[[RequestOutput], None]] = None  # metrics hook
        scheduler.set_output_callback(self._deliver)

    # ---- front-end side (event loop thread) ----
    def submit(self, inp: GenerateInput) -> asyncio.Queue:
        q: asyncio.Queue = asyncio.Queue()
        with self._lock:
            if inp.rid in self._queues:
                raise ValueError(f"duplicate request id {inp.rid!r}")
            self._queues[inp.rid] = (asyncio.get_running_loop(), q)
        self._inbox.put(inp)
        return q

    def abort(self, rid: str) -> None:
        self._inbox.put(AbortInput(rid))

    def stats(self) -> dict:
        return self.scheduler.stats()

    def flush_cache(self) -> bool:
        """True when the server is idle (nothing to flush beyond that: no prefix cache yet)."""
        return self.scheduler.is_idle() and self._inbox.empty()

    # ---- scheduler side (background thread) ----
    def _deliver(self, out: RequestOutput) -> None:
        with self._lock:
            entry = self._queues.pop(out.rid, None) if out.finished else self._queues.get(out.rid)
        if self.on_output is not None:
            self.on_output(out)
        if entry is not None:
            loop, q = entry
            try:
                loop.call_soon_threadsafe(q.put_nowait, out)
            except RuntimeError:  # the caller's event loop is gone (shutdown): nobody to tell
                pass

    def _drain_inbox(self, block: bool) -> None:
        try:
            item = self._inbox.get(timeout=0.05) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            if isinstance(item, AbortInput):
                self.scheduler.abort(item.rid)
            else:
                self.scheduler.add_request(item)
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._drain_inbox(block=self.scheduler.is_idle())
                if not self.scheduler.is_idle():
                    self.scheduler.step()
            except Exception as e:  # never leave clients hanging on a dead loop
                log.exception("scheduler loop error; failing all requests in flight")
                self.scheduler.abort_all(f"internal error: {e}")

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="scheduler", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
