"""Benchmark client: streaming `/generate` requests in a closed loop at a fixed concurrency.

`run_closed_loop(url, jobs, concurrency, on_done)` keeps `concurrency` requests in flight until
every job ran (a new one starts when one finishes), and returns the wall time from the first
send to the last completion. A job is {"input_ids", "sampling_params", ...metadata}; its record
(passed to on_done, then returned in order) is the metadata plus:
    prompt_tokens, completion_tokens (server meta_info), latency_s (send -> [DONE], client
    clock), ttft_s (send -> first event carrying an output token), tpot_s, chunks (SSE events
    with new tokens; one verify step can emit several tokens per event), server_latency_s
    (meta_info.e2e_latency), finish_reason, spec_* counters when the engine speculates, text,
    output_ids, error (None, or the message of a failed request; it is never retried).
Streams follow SGLang: each `data:` event carries the cumulative text/output_ids and meta_info;
the stream ends with `data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Callable, Optional

from specpilot.bench.summary import tpot

SPEC_KEYS = ("spec_verify_ct", "spec_accept_length", "spec_accept_rate",
             "spec_num_correct_drafts", "spec_num_proposed_drafts")


async def one_request(client, url: str, job: dict) -> dict:
    payload = {"input_ids": job["input_ids"], "sampling_params": job["sampling_params"],
               "stream": True}
    meta = {k: v for k, v in job.items() if k not in ("input_ids", "sampling_params")}
    rec = {**meta, "prompt_tokens": len(job["input_ids"]), "completion_tokens": 0,
           "latency_s": None, "ttft_s": None, "tpot_s": None, "chunks": 0,
           "server_latency_s": None, "finish_reason": None, "text": "", "output_ids": [],
           "error": None}
    last, n_prev = None, 0
    t0 = time.perf_counter()
    try:
        async with client.stream("POST", url + "/generate", json=payload) as resp:
            if resp.status_code != 200:
                body = (await resp.aread()).decode("utf-8", "replace")
                raise RuntimeError(f"HTTP {resp.status_code}: {body[:300]}")
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                obj = json.loads(data)
                if "error" in obj and "meta_info" not in obj:
                    raise RuntimeError(str(obj["error"].get("message", obj["error"])))
                n = len(obj.get("output_ids") or [])
                if n > n_prev:
                    rec["chunks"] += 1
                    if rec["ttft_s"] is None:
                        rec["ttft_s"] = time.perf_counter() - t0
                    n_prev = n
                last = obj
        rec["latency_s"] = time.perf_counter() - t0
        if last is None:
            raise RuntimeError("the stream ended without any event")
        mi = last.get("meta_info") or {}
        rec.update(prompt_tokens=mi.get("prompt_tokens", rec["prompt_tokens"]),
                   completion_tokens=mi.get("completion_tokens", n_prev),
                   server_latency_s=mi.get("e2e_latency"), finish_reason=mi.get("finish_reason"),
                   text=last.get("text", ""), output_ids=list(last.get("output_ids") or []))
        for k in SPEC_KEYS:
            if k in mi:
                rec[k] = mi[k]
        rec["tpot_s"] = tpot(rec["latency_s"], rec["ttft_s"], rec["completion_tokens"])
    except Exception as e:  # a failed request is recorded, not fatal for the benchmark
        rec["latency_s"] = rec["latency_s"] or time.perf_counter() - t0
        rec["error"] = f"{type(e).__name__}: {e}"
    return rec


async def _closed_loop(url: str, jobs: list[dict], concurrency: int,
                       on_done: Optional[Callable[[dict], None]], timeout_s: float):
    import httpx

    limits = httpx.Limits(max_connections=concurrency + 2, max_keepalive_connections=concurrency + 2)
    queue: asyncio.Queue = asyncio.Queue()
    for i, job in enumerate(jobs):
        queue.put_nowait((i, job))
    results: list[Optional[dict]] = [None] * len(jobs)
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), limits=limits) as client:
        async def worker():
            while True:
                try:
                    i, job = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                rec = await one_request(client, url, job)
                results[i] = rec
                if on_done is not None:
                    on_done(rec)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(jobs)))))
        wall = time.perf_counter() - t0
    return results, wall


def run_closed_loop(url: str, jobs: list[dict], concurrency: int,
                    on_done: Optional[Callable[[dict], None]] = None,
                    timeout_s: float = 3600.0) -> tuple[list[dict], float]:
    """(records in job order, wall seconds)."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    return asyncio.run(_closed_loop(url.rstrip("/"), jobs, concurrency, on_done, timeout_s))
