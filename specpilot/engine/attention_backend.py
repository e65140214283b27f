"""Reference attention backend in plain torch (CPU and GPU): correct first, fast later.

prepare(...) is called once per batch outside the model; forward(q, k, v, layer_id, scale) is
called by every attention layer: it stores the new rows' k/v into the KV cache, then for each
request attends its new rows over the request's cached positions 0 .. prefix+extend-1, causally
(row j of a request sees positions <= prefix + j), optionally within a sliding window. GQA by
head grouping (kv head = q head // group). Rolled-back rows are never seen: a request's keys are
exactly its first prefix+extend positions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specpilot.engine.kv_cache import KVCache, ReqToTokenTable


class TorchNativeBackend:
    def __init__(self, kv: KVCache, req_to_token: ReqToTokenTable):
        self.kv = kv
        self.req_to_token = req_to_token
        self.loc = None
        self.recurrent = None  # RecurrentBatch for hybrid targets, set by the runner
        self.segments: list[tuple[int, int, int, torch.Tensor]] = []  # start, ext, prefix, slots
        self._masks: dict = {}

    def prepare(self, req_pool_indices: list[int], prefix_lens: list[int], extend_lens: list[int],
                loc: torch.Tensor) -> "TorchNativeBackend":
        """loc [T]: KV slots of the new rows (already written into req_to_token by the runner)."""
        self.loc = loc
        self.segments = []
        start = 0
        for row, prefix, ext in zip(req_pool_indices, prefix_lens, extend_lens):
            total = prefix + ext
            slots = self.req_to_token.table[row, :total]
            self.segments.append((start, ext, prefix, slots))
            start += ext
        self._masks: dict = {}
        return self

    def row_segments(self) -> list[tuple[int, int]]:
        """(first row, number of rows) of each request in the flat batch."""
        return [(start, ext) for start, ext, _, _ in self.segments]

    def _mask(self, i: int, window: int | None):
        """Bool [ext, prefix + ext]: row j (position prefix + j) sees key p iff p <= prefix + j
        and, with a sliding window W, prefix + j - p < W. None when every key is visible."""
        key = (i, window)
        if key not in self._masks:
            _, ext, prefix, slots = self.segments[i]
            total = prefix + ext
            if ext == 1 and (window is None or total <= window):
                self._masks[key] = None
            else:
                keys = torch.arange(total, device=slots.device)[None, :]
                qpos = (prefix + torch.arange(ext, device=slots.device))[:, None]
                mask = keys <= qpos
                if window is not None:
                    mask &= qpos - keys < window
                self._masks[key] = mask
        return self._masks[key]

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int,
                scale: float, window: int | None = None,
                gate: torch.Tensor | None = None) -> torch.Tensor:
        """q [T, Hq, D], k/v [T, Hkv, D] -> [T, Hq, D]; `window`: sliding-window size (HF
        semantics: a query at position t sees keys at positions > t - window); gate [T, Hq, D]
        (gated attention): the output is o * sigmoid(gate)."""
        self.kv.store(layer_id, self.loc, k, v)
        k_buf, v_buf = self.kv.k[layer_id], self.kv.v[layer_id]
        out = torch.empty_like(q)
        gqa = q.shape[1] != k.shape[1]
        for i, (start, ext, _, slots) in enumerate(self.segments):
            mask = self._mask(i, window)
            qi = q[start:start + ext].transpose(0, 1)  # [Hq, ext, D]
            ki = k_buf[slots].transpose(0, 1)  # [Hkv, L, D]
            vi = v_buf[slots].transpose(0, 1)
            oi = F.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask, scale=scale,
                                                enable_gqa=gqa)
            out[start:start + ext] = oi.transpose(0, 1)
        return out if gate is None else out * torch.sigmoid(gate)
