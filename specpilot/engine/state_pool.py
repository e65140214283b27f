"""Recurrent state of hybrid targets (Gated DeltaNet): one slot per request-table row, fp32.

For every recurrent layer l and table row r: conv[l, r] [C, K-1] (the last K-1 conv inputs) and
rec[l, r] [H, Dk, Dv] (the delta-rule state). A request's state always describes exactly its
first kv_len positions (the committed prefix), like its KV pages; a request that starts from
position 0 starts from zeros, so rows need no clearing when they are reused.

Per forward the runner hands the model a RecurrentBatch (through the attention backend):
  EXTEND / DECODE: each layer reads the state, runs its rows and writes the state back.
  VERIFY: the committed state is left untouched; each layer stashes its per-row inputs
      (conv inputs [B, C]; k, v, g, beta of the delta rule). After acceptance, commit(accepted)
      replays rows 0..a of each request from the committed state (replay, not a per-row state
      snapshot: B x (C + H(Dk + Dv + 2)) floats stashed per layer instead of B x H Dk Dv).
"""

from __future__ import annotations

import torch

from specpilot.layers.gdn import delta_rule


class RecurrentStatePool:
    def __init__(self, num_layers: int, num_rows: int, conv_dim: int, conv_kernel: int,
                 heads: int, dk: int, dv: int, device: torch.device):
        self.conv = torch.zeros(num_layers, num_rows, conv_dim, conv_kernel - 1,
                                dtype=torch.float32, device=device)
        self.rec = torch.zeros(num_layers, num_rows, heads, dk, dv, dtype=torch.float32,
                               device=device)

    @property
    def bytes_per_row(self) -> int:
        return (self.conv[:, 0].numel() + self.rec[:, 0].numel()) * 4


class RecurrentBatch:
    def __init__(self, pool: RecurrentStatePool, rows: list[int], prefix_lens: list[int],
                 verify: bool):
        self.pool, self.rows, self.verify = pool, rows, verify
        self.fresh = [p == 0 for p in prefix_lens]
        self.stash: dict[tuple[int, int], tuple] = {}  # (layer, i) -> (x, k, v, g, beta)

    def initial(self, layer: int, i: int):
        """(conv window [C, K-1], state [H, Dk, Dv]) of request i before this forward."""
        if self.fresh[i]:
            return torch.zeros_like(self.pool.conv[layer, 0]), torch.zeros_like(
                self.pool.rec[layer, 0])
        r = self.rows[i]
        return self.pool.conv[layer, r], self.pool.rec[layer, r]

    def update(self, layer: int, i: int, window, state, x, k, v, g, beta) -> None:
        """After layer `layer` ran request i's rows: write back, or stash them under VERIFY."""
        if self.verify:
            self.stash[(layer, i)] = (x, k, v, g, beta)
            return
        r = self.rows[i]
        self.pool.conv[layer, r] = window
        self.pool.rec[layer, r] = state

    def commit(self, accepted: list[int]) -> None:
        """VERIFY only: state after rows 0..accepted[i] of each request becomes its state."""
        assert self.verify
        for (layer, i), (x, k, v, g, beta) in self.stash.items():
            n = accepted[i] + 1
            window, state = self.initial(layer, i)
            seq = torch.cat([window, x[:n].transpose(0, 1).float()], dim=1)
            r = self.rows[i]
            self.pool.conv[layer, r] = seq[:, seq.shape[1] - window.shape[1]:]
            q0 = torch.zeros_like(k[:n])
            self.pool.rec[layer, r] = delta_rule(q0, k[:n], v[:n], g[:n], beta[:n], state)[1]
        self.stash.clear()
