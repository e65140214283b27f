"""Reference attention backend in plain torch (CPU and GPU): correct first, fast later.

prepare(...) is called once per batch outside the model; forward(q, k, v, layer_id, scale) is
called by every attention layer: it stores the new rows' k/v into the KV cache, then for each
request attends its new rows over the request's cached positions 0 .. prefix+extend-1, causally
(row j of a request sees positions <= prefix + j). GQA by head grouping (kv head = q head // group).
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
        self.segments: list[tuple[int, int, torch.Tensor, torch.Tensor | None]] = []

    def prepare(self, req_pool_indices: list[int], prefix_lens: list[int], extend_lens: list[int],
                loc: torch.Tensor) -> "TorchNativeBackend":
        """loc [T]: KV slots of the new rows (already written into req_to_token by the runner)."""
        self.loc = loc
        self.segments = []
        dev = loc.device
        start = 0
        for row, prefix, ext in zip(req_pool_indices, prefix_lens, extend_lens):
            total = prefix + ext
            slots = self.req_to_token.table[row, :total]
            mask = None
            if ext > 1:  # new row j may see keys 0 .. prefix + j
                keys = torch.arange(total, device=dev)[None, :]
                mask = keys <= (prefix + torch.arange(ext, device=dev))[:, None]
            self.segments.append((start, ext, slots, mask))
            start += ext
        return self

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int,
                scale: float) -> torch.Tensor:
        """q [T, Hq, D], k/v [T, Hkv, D] -> [T, Hq, D]."""
        self.kv.store(layer_id, self.loc, k, v)
        k_buf, v_buf = self.kv.k[layer_id], self.kv.v[layer_id]
        out = torch.empty_like(q)
        gqa = q.shape[1] != k.shape[1]
        for start, ext, slots, mask in self.segments:
            qi = q[start:start + ext].transpose(0, 1)  # [Hq, ext, D]
            ki = k_buf[slots].transpose(0, 1)  # [Hkv, L, D]
            vi = v_buf[slots].transpose(0, 1)
            oi = F.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask, scale=scale,
                                                enable_gqa=gqa)
            out[start:start + ext] = oi.transpose(0, 1)
        return out
