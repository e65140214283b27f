"""Triton attention backends: drop-in replacements for TorchNativeBackend (target) and
DraftAttentionBackend (drafter block pass), computing the same function with the kernels of
specpilot/kernels/attention.py.

What differs from the torch reference is where the per-batch metadata lives: prepare() turns the
host lists into int32 device tensors (table row, number of keys, new rows and first row of each
request) with one host-to-device copy, into a persistent buffer sized by the table's row count, so
their addresses stay fixed between steps. forward() then stores the new K/V and launches a fixed
number of kernels (one attention kernel, plus the split-KV merge when it splits): no host sync and
no Python loop over requests. The new rows' own K/V are read from the dense k/v arguments,
prefix keys through req_to_token.
"""

from __future__ import annotations

import itertools

import torch

from specpilot.engine.kv_cache import KVCache, ReqToTokenTable
from specpilot.kernels.attention import paged_attention
from specpilot.spec.draft_attention import DraftAttentionBackend

FUSE_OUT_GATE = True  # gated attention's o * sigmoid(gate) in the attention launch (False: torch)


def _metadata_buffer(req_to_token: ReqToTokenTable, fields: int) -> torch.Tensor:
    """int32 [fields, table rows]: no batch has more requests than the table has rows."""
    table = req_to_token.table
    return torch.zeros((fields, table.shape[0]), dtype=torch.int32, device=table.device)


class TritonBackend:
    """Target attention with TorchNativeBackend's interface (prepare / forward / row_segments,
    `loc`, `recurrent`), plus an optional tree mask for tree verification."""

    def __init__(self, kv: KVCache, req_to_token: ReqToTokenTable):
        self.kv = kv
        self.req_to_token = req_to_token
        self.loc = None
        self.recurrent = None  # RecurrentBatch for hybrid targets, set by the runner
        self._meta = _metadata_buffer(req_to_token, 4)  # req rows, kv lens, ext lens, q starts
        self._segments: list[tuple[int, int]] = []
        self._batch = 0
        self._max_ext = 0
        self._max_keys = 0
        self._tree_mask = None
        self._tree_positions = None

    def prepare(self, req_pool_indices: list[int], prefix_lens: list[int], extend_lens: list[int],
                loc: torch.Tensor, tree_mask: torch.Tensor | None = None,
                tree_positions: torch.Tensor | None = None,
                graph: bool = False) -> "TritonBackend":
        """loc [T]: KV slots of the new rows (already written into req_to_token by the runner).
        graph: the split-KV factor comes from the table width instead of this batch's longest
        request, so it is the same at capture and at every replay (engine/cuda_graph.py).

        tree_mask (optional, int32 [T, ceil(max ext / 32)], see kernels.attention.tree_mask_words):
        row t sees new row j of its request iff bit j is set, instead of causally; prefix keys
        stay fully visible. tree_positions (int [T]): the rows' positions, for sliding windows.
        """
        starts = list(itertools.accumulate(extend_lens, initial=0))[:-1]
        kv_lens = [p + e for p, e in zip(prefix_lens, extend_lens)]
        batch = len(req_pool_indices)
        host = torch.tensor([req_pool_indices, kv_lens, extend_lens, starts], dtype=torch.int32)
        self._meta[:, :batch].copy_(host.view(4, batch), non_blocking=True)
        self.loc = loc
        self._segments = list(zip(starts, extend_lens))
        self._batch = batch
        self._max_ext = max(extend_lens, default=0)
        self._max_keys = None if graph else max(kv_lens, default=0)
        self._tree_mask, self._tree_positions = tree_mask, tree_positions
        return self

    def row_segments(self) -> list[tuple[int, int]]:
        """(first row, number of rows) of each request in the flat batch."""
        return self._segments

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer_id: int,
                scale: float, window: int | None = None,
                gate: torch.Tensor | None = None) -> torch.Tensor:
        """q [T, Hq, D], k/v [T, Hkv, D] -> [T, Hq, D]; `window`: sliding-window size (HF
        semantics: a query at position t sees keys at positions > t - window); gate [T, Hq, D]
        (gated attention): o * sigmoid(gate), in the kernel that writes the output unless
        FUSE_OUT_GATE is off."""
        self.kv.store(layer_id, self.loc, k, v)
        rows, kv_lens, ext_lens, starts = self._meta[:, :self._batch]
        out = paged_attention(
            q, self.kv.k[layer_id], self.kv.v[layer_id], self.req_to_token.table, rows, kv_lens,
            scale=scale, ext_lens=ext_lens, q_starts=starts, max_ext=self._max_ext, k_new=k,
            v_new=v, causal=True, window=window, tree_mask=self._tree_mask,
            q_pos=self._tree_positions, max_keys=self._max_keys,
            out_gate=gate if FUSE_OUT_GATE else None)
        return out if gate is None or FUSE_OUT_GATE else out * torch.sigmoid(gate)


class TritonDraftAttentionBackend(DraftAttentionBackend):
    """DraftAttentionBackend with the block pass in Triton; context storage is inherited."""

    def __init__(self, kv: KVCache, req_to_token: ReqToTokenTable):
        super().__init__(kv, req_to_token)
        self._meta = _metadata_buffer(req_to_token, 2)  # req rows, kv lens (context + block)
        self._batch = 0
        self._max_keys = 0

    def prepare_block(self, rows: list[int], ctx_lens: list[int], block_len: int,
                      graph: bool = False):
        """Request i lives in table row rows[i]; its context is positions 0..ctx_lens[i]-1.
        graph: split-KV factor from the table width (fixed for a CUDA graph), see prepare()."""
        batch = len(rows)
        kv_lens = [n + block_len for n in ctx_lens]
        host = torch.tensor([rows, kv_lens], dtype=torch.int32)
        self._meta[:, :batch].copy_(host.view(2, batch), non_blocking=True)
        self.block_len = block_len
        self._batch = batch
        self._max_keys = None if graph else max(kv_lens, default=0)
        return self

    def attend(self, q, k, v, layer_id: int, scale: float, causal: bool, window) -> torch.Tensor:
        """q [R*Bd, Hq, D]; k, v [R*Bd, Hkv, D] of the block rows -> [R*Bd, Hq, D]."""
        rows, kv_lens = self._meta[:, :self._batch]
        return paged_attention(
            q, self.kv.k[layer_id], self.kv.v[layer_id], self.req_to_token.table, rows, kv_lens,
            scale=scale, ext=self.block_len, k_new=k, v_new=v, causal=causal, window=window,
            max_keys=self._max_keys)
