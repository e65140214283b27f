"""Attention for the drafter's block pass over a context-only draft KV cache.

The draft KV cache has one K/V buffer per draft layer, indexed by the same slots as the target's
KV (it shares the request-to-token table): position p of a request has its draft context K/V in
slot req_to_token[row, p]. Only committed context rows are ever stored (each once); the block's
own K/V is transient and lives only inside `attend`.

Block pass for request r with anchor position s (context = positions 0..s-1), block rows
i = 0..Bd-1 at positions s+i:
  context key p visible to row i  iff  window is None or (s + i) - p < window
  block key j visible to row i    iff  (not causal or j <= i) and (window is None or |i-j| < window)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specpilot.engine.kv_cache import KVCache, ReqToTokenTable


class DraftAttentionBackend:
    def __init__(self, kv: KVCache, req_to_token: ReqToTokenTable):
        self.kv = kv
        self.req_to_token = req_to_token
        self.ctx_loc = None
        self.blocks: list[tuple[int, torch.Tensor]] = []  # per request: (ctx_len, ctx slots)
        self.block_len = 0

    def prepare_context(self, loc: torch.Tensor) -> "DraftAttentionBackend":
        """loc [N]: slots of the context rows about to be stored."""
        self.ctx_loc = loc
        return self

    def store(self, layer_id: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v [N, Hkv, D] of the context rows prepared above."""
        self.kv.store(layer_id, self.ctx_loc, k, v)

    def prepare_block(self, rows: list[int], ctx_lens: list[int], block_len: int):
        """Request i lives in table row rows[i]; its context is positions 0..ctx_lens[i]-1."""
        self.block_len = block_len
        self.blocks = [(n, self.req_to_token.table[row, :n]) for row, n in zip(rows, ctx_lens)]
        return self

    def _mask(self, ctx_len: int, causal: bool, window, device) -> torch.Tensor | None:
        b = self.block_len
        if not causal and window is None:
            return None
        i = torch.arange(b, device=device)[:, None]
        p = torch.arange(ctx_len, device=device)[None, :]
        j = torch.arange(b, device=device)[None, :]
        ctx_ok = torch.ones(b, ctx_len, dtype=torch.bool, device=device)
        blk_ok = torch.ones(b, b, dtype=torch.bool, device=device)
        if window is not None:
            ctx_ok = (ctx_len + i) - p < window
            blk_ok = (i - j).abs() < window
        if causal:
            blk_ok = blk_ok & (j <= i)
        return torch.cat([ctx_ok, blk_ok], dim=1)

    def attend(self, q, k, v, layer_id: int, scale: float, causal: bool, window) -> torch.Tensor:
        """q [R*Bd, Hq, D]; k, v [R*Bd, Hkv, D] of the block rows -> [R*Bd, Hq, D]."""
        b = self.block_len
        out = torch.empty_like(q)
        k_buf, v_buf = self.kv.k[layer_id], self.kv.v[layer_id]
        gqa = q.shape[1] != k.shape[1]
        for r, (ctx_len, slots) in enumerate(self.blocks):
            rows = slice(r * b, (r + 1) * b)
            kk = torch.cat([k_buf[slots], k[rows]], dim=0).transpose(0, 1)  # [Hkv, L, D]
            vv = torch.cat([v_buf[slots], v[rows]], dim=0).transpose(0, 1)
            mask = self._mask(ctx_len, causal, window, q.device)
            o = F.scaled_dot_product_attention(q[rows].transpose(0, 1), kk, vv, attn_mask=mask,
                                               scale=scale, enable_gqa=gqa)
            out[rows] = o.transpose(0, 1)
        return out
