"""Prometheus metrics of the server (`GET /metrics`), SGLang's set under a `specpilot_` prefix.

Contracts:
  * Each `ServerMetrics` has its own CollectorRegistry, so several apps (tests) can live in one
    process without "duplicated timeseries" errors.
  * Per-request metrics come from `on_output`, which the EngineClient calls on the scheduler
    thread for every RequestOutput; it must be cheap and never raise. The front end calls
    `request_started(rids)` before submitting (the clock for TTFT / e2e) and `forget(rids)`
    when it is done with them (aborted requests may never produce a finished output); a
    submission that fails forgets only the rids `request_started` returned.
  * Engine gauges (running / waiting requests, KV usage, throughput) are read from
    `client.stats()` when /metrics is scraped.

Exported (counters get `_total` appended by prometheus_client):
  specpilot_prompt_tokens_total, specpilot_generation_tokens_total,
  specpilot_requests_total{finish_reason}, specpilot_e2e_request_latency_seconds,
  specpilot_time_to_first_token_seconds, specpilot_num_running_reqs, specpilot_num_waiting_reqs,
  specpilot_token_usage, specpilot_kv_used_tokens, specpilot_kv_total_tokens,
  specpilot_gen_throughput, specpilot_num_retractions, specpilot_spec_accept_length;
  speculative engines also: specpilot_spec_verify_steps_total (drafts = verify passes),
  specpilot_spec_draft_tokens_total (proposed), specpilot_spec_accepted_tokens_total (accepted
  drafts) and specpilot_spec_accepted_tokens_by_position_total{position} (block slot j accepted).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily

from specpilot.core import RequestOutput

logger = logging.getLogger(__name__)

P = "specpilot_"
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
                   300.0, 600.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServerMetrics:
    def __init__(self, client, model_name: str):
        self.client = client
        self.registry = r = CollectorRegistry(auto_describe=True)
        lab = ["model_name"]
        self.prompt_tokens = Counter(P + "prompt_tokens", "Prompt tokens", lab, registry=r)
        self.generation_tokens = Counter(P + "generation_tokens", "Generated tokens", lab,
                                         registry=r)
        self.requests = Counter(P + "requests", "Finished requests", lab + ["finish_reason"],
                                registry=r)
        self.e2e = Histogram(P + "e2e_request_latency_seconds", "Request latency", lab,
                             buckets=LATENCY_BUCKETS, registry=r)
        self.ttft = Histogram(P + "time_to_first_token_seconds", "Time to first token", lab,
                              buckets=LATENCY_BUCKETS, registry=r)
        g = {}
        for name, doc in (("num_running_reqs", "Requests in the running batch"),
                          ("num_waiting_reqs", "Requests waiting to be scheduled"),
                          ("token_usage", "KV pool usage (used / total tokens)"),
                          ("kv_used_tokens", "KV pool tokens in use"),
                          ("kv_total_tokens", "KV pool capacity in tokens"),
                          ("gen_throughput", "Generation throughput (token/s)"),
                          ("num_retractions", "Requests retracted so far (KV pressure)"),
                          ("spec_accept_length", "Average speculative accept length")):
            g[name] = Gauge(P + name, doc, lab, registry=r)
        self.gauges = g
        r.register(_SpecCounters(client, model_name))
        self.model_name = model_name
        self._start: dict[str, float] = {}
        self._first_seen: set[str] = set()
        self._lock = threading.Lock()

    # ---- front end (event loop) ----
    def request_started(self, rids: Iterable[str]) -> list[str]:
        """Starts the clock of each rid not already running; returns those (a request refused
        for a duplicate rid must not touch the running request's clock: forget only these)."""
        now = time.perf_counter()
        fresh = []
        with self._lock:
            for rid in rids:
                if rid not in self._start:
                    self._start[rid] = now
                    fresh.append(rid)
        return fresh

    def forget(self, rids: Iterable[str]) -> None:
        with self._lock:
            for rid in rids:
                self._start.pop(rid, None)
                self._first_seen.discard(rid)

    # ---- scheduler thread ----
    def on_output(self, out: RequestOutput) -> None:
        try:
            self._observe(out)
        except Exception:  # metrics must never take the scheduler down
            logger.exception("metrics update failed")

    def _observe(self, out: RequestOutput) -> None:
        m = self.model_name
        now = time.perf_counter()
        with self._lock:
            t0 = self._start.get(out.rid)
            first = out.new_token_ids and out.rid not in self._first_seen and t0 is not None
            if first:
                self._first_seen.add(out.rid)
            if out.finished or out.error:
                self._start.pop(out.rid, None)
                self._first_seen.discard(out.rid)
        if out.new_token_ids:
            self.generation_tokens.labels(m).inc(len(out.new_token_ids))
        if first:
            self.ttft.labels(m).observe(now - t0)
        if out.finished or out.error:
            reason = "error" if out.error else (out.finish_reason or {}).get("type", "unknown")
            self.requests.labels(m, str(reason)).inc()
            if out.prompt_tokens:
                self.prompt_tokens.labels(m).inc(out.prompt_tokens)
            if t0 is not None:
                self.e2e.labels(m).observe(now - t0)

    # ---- scrape ----
    def refresh(self) -> None:
        try:
            s = self.client.stats()
        except Exception:
            logger.exception("client.stats() failed")
            return
        m, g = self.model_name, self.gauges
        for key in ("num_running", "num_waiting"):
            if key in s:
                g[key + "_reqs"].labels(m).set(s[key])
        for key in ("kv_used_tokens", "kv_total_tokens", "gen_throughput", "num_retractions"):
            if s.get(key) is not None:
                g[key].labels(m).set(s[key])
        if s.get("kv_total_tokens"):
            g["token_usage"].labels(m).set(s.get("kv_used_tokens", 0) / s["kv_total_tokens"])
        acc = s.get("avg_spec_accept_length", s.get("spec_accept_length"))
        if acc is not None:
            g["spec_accept_length"].labels(m).set(acc)

    def render(self) -> bytes:
        self.refresh()
        return generate_latest(self.registry)


class _SpecCounters:
    """Cumulative speculative counters, read from the scheduler's totals at scrape time."""

    def __init__(self, client, model_name: str):
        self.client, self.model_name = client, model_name

    def describe(self):
        return []

    def collect(self):
        s = self.client.stats()
        if "spec_verify_ct" not in s:
            return
        m = self.model_name
        for name, key, doc in (
                ("spec_verify_steps", "spec_verify_ct", "Verify passes (drafts)"),
                ("spec_draft_tokens", "spec_num_proposed_drafts", "Draft tokens proposed"),
                ("spec_accepted_tokens", "spec_num_correct_drafts", "Draft tokens accepted")):
            c = CounterMetricFamily(P + name, doc, labels=["model_name"])
            c.add_metric([m], s[key])
            yield c
        c = CounterMetricFamily(P + "spec_accepted_tokens_by_position",
                                "Draft tokens accepted at each block slot",
                                labels=["model_name", "position"])
        for j, n in enumerate(s.get("spec_accepted_per_position", [])):
            c.add_metric([m, str(j)], n)
        yield c
