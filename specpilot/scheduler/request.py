"""Req: one request as the scheduler sees it (python lists, no tensors).

Invariant: `kv_slots[p]` is the KV slot of position p, for p < kv_len == len(kv_slots); the
positions in KV are a prefix of the request's tokens (prompt + output so far).
- waiting (new, partly prefilled, or retracted): prefill extends KV over those tokens until
  kv_len == seq_len, then the sampled token is appended, so kv_len == seq_len - 1;
- running: kv_len == seq_len - 1; a decode step puts the newest token into KV and appends one.
"""

from __future__ import annotations

import time
from typing import Optional

from specpilot.core import SamplingParams


class SpecCounters:
    """Per-request speculative counters, named as SGLang's meta_info keys."""

    def __init__(self):
        self.verify_ct = 0
        self.num_correct = 0
        self.num_proposed = 0
        self.accept_histogram: list[int] = []  # [a] = verify steps that accepted a drafts

    def record(self, accepted: int, proposed: int) -> None:
        self.verify_ct += 1
        self.num_correct += accepted
        self.num_proposed += proposed
        if len(self.accept_histogram) <= proposed:
            self.accept_histogram.extend([0] * (proposed + 1 - len(self.accept_histogram)))
        self.accept_histogram[accepted] += 1

    def meta(self, completion_tokens: int) -> dict:
        if not self.verify_ct:
            return {}
        return {"spec_verify_ct": self.verify_ct,
                "spec_accept_length": completion_tokens / self.verify_ct,
                "spec_accept_rate": self.num_correct / max(self.num_proposed, 1),
                "spec_num_correct_drafts": self.num_correct,
                "spec_num_proposed_drafts": self.num_proposed,
                "spec_correct_drafts_histogram": list(self.accept_histogram)}


class Req:
    def __init__(self, rid: str, input_ids: list[int], sampling: SamplingParams, detok=None):
        self.rid = rid
        self.input_ids = input_ids
        self.output_ids: list[int] = []
        self.sampling = sampling
        self.detok = detok  # IncrementalDetokenizer, or None with --skip-tokenizer-init
        self.row: Optional[int] = None  # request-to-token table row while it holds KV
        self.kv_slots: list[int] = []
        self.finish_reason: Optional[dict] = None
        self.retractions = 0
        self.arrival = time.monotonic()
        self.first_token_time: Optional[float] = None
        self.pending_ids: list[int] = []  # new tokens since the last output message
        self.pending_text = ""
        self.spec = SpecCounters()
        self.forced_ids: Optional[list[int]] = None
        self.forced_checks: list[tuple[int, float]] = []

    def token_slice(self, start: int, stop: int) -> list[int]:
        """(prompt + output so far)[start:stop], 0 <= start <= stop, without building that list."""
        n = len(self.input_ids)
        if stop <= n:
            return self.input_ids[start:stop]
        if start >= n:
            return self.output_ids[start - n:stop - n]
        return self.input_ids[start:] + self.output_ids[:stop - n]

    @property
    def seq_len(self) -> int:
        return len(self.input_ids) + len(self.output_ids)

    @property
    def kv_len(self) -> int:
        return len(self.kv_slots)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None
