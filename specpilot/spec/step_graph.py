"""The whole greedy `stock` DECODE step in one CUDA graph per batch bucket: StockStepGraphs.

One replay runs, for R requests padded to the bucket:
  draft block pass -> greedy proposal -> verify forward (features captured) -> argmax and
  greedy accept (or the simulated acceptance's count) -> recurrent-state commit (hybrid
  targets) -> drafter context store of all B rows,
and leaves one int64 tensor [R, 2 + P]: accepted count, bonus token, the P drafts. The step's
only device-to-host copy reads it. Before the replay the host writes the inputs (anchors, anchor
positions, KV slots, table rows) into the static buffers of the worker's VERIFY TargetGraphs and
DraftGraphs, which this class shares; their own graphs stay for the steps this one does not
serve (sampling, penalties, banned tokens, token forcing).

Padding requests behave as in those graphs: their KV goes to the scratch slot 0 (in both the
target's and the drafter's cache), their recurrent state to the spare table row, their outputs
are dropped.
"""

from __future__ import annotations

import torch

from specpilot.engine.cuda_graph import _BucketGraphs
from specpilot.spec.accept import greedy_accept


class StockStepGraphs(_BucketGraphs):
    what = "stock step"

    def __init__(self, worker, capture: bool = True):
        self.worker, self.target, self.draft = worker, worker.verify_graphs, worker.draft_graphs
        super().__init__(worker.runner, self.target.max_bs, self.target.buckets)
        if self.draft.buckets != self.buckets:
            raise ValueError("the VERIFY and drafter graphs must share their batch buckets")
        self.rows = worker.num_draft_tokens
        self.simulate = worker.simulate  # SimulatedAcceptance or None
        # simulated acceptance: the rows every request keeps this step (bonus included)
        self.sim_rows = torch.ones(1, dtype=torch.int64, device=worker.runner.device)
        if capture:
            self._capture_all()

    def _prepare(self, bs: int, rows_l: list[int], prefix_lens: list[int]) -> None:
        self.draft._prepare(bs, rows_l, prefix_lens)
        self.target._prepare(bs, rows_l, prefix_lens)

    def _forward(self, bs: int) -> torch.Tensor:
        w, b = self.worker, self.rows
        n = bs * b
        hidden = self.draft._forward(bs)  # [bs, Bd, H]
        anchors = self.draft.block[:bs, 0]
        drafts = w.proposer(w.drafter, hidden, anchors, None).tokens  # [bs, P]
        self.target.ids[:n].copy_(torch.cat([anchors[:, None], drafts], dim=1).reshape(-1))
        logits, aux = self.target._forward(bs)
        accepted, bonus = self.accept(drafts, logits.view(bs, b, -1))
        recurrent = self.target.backend.recurrent
        if recurrent is not None:
            recurrent.commit(accepted)
        w._store_context(aux, self.target.positions[:n], self.target.loc[:n])
        return torch.cat([accepted[:, None], bonus[:, None], drafts], dim=1)

    def accept(self, drafts: torch.Tensor, logits: torch.Tensor):
        """drafts [bs, P], logits [bs, B, V] -> (accepted [bs], bonus [bs]) on the device."""
        top = logits.argmax(dim=-1)
        if self.simulate is None:
            return greedy_accept(drafts, top)
        return self.simulate.accept(top, self.sim_rows)

    def _set_sim_rows(self, sim_rows: int | None) -> None:
        if self.simulate is not None:
            if sim_rows is None:
                raise ValueError("the worker simulates acceptance: pass sim_rows")
            self.sim_rows.fill_(sim_rows)

    @torch.inference_mode()
    def run(self, rows_l: list[int], prefix_lens: list[int], anchors: torch.Tensor,
            loc: torch.Tensor, sim_rows: int | None = None) -> torch.Tensor:
        """One greedy step for len(rows_l) requests (anchors [R] at positions prefix_lens, loc
        [R * B] the KV slots of the verified rows). sim_rows: the simulated acceptance's rows
        for this step (required when the worker simulates). Returns int64 [R, 2 + P] (accepted,
        bonus, drafts), a view valid until the next run."""
        self._set_sim_rows(sim_rows)
        bs = self.target.fill(rows_l, prefix_lens, None, loc)
        self.draft.fill(rows_l, prefix_lens, anchors)
        return self._launch(bs)[:len(rows_l)]

    @torch.inference_mode()
    def run_lagged(self, prev_out: torch.Tensor, sim_rows: int | None = None) -> torch.Tensor:
        """The step after prev_out (the output of this object's last run or run_lagged, not
        yet replaced: the same requests in the same bucket), for the overlap scheduler. Its
        inputs are that step's, moved on on the device (advance); the host writes nothing but
        the new KV slots' table entries (StockSpecWorker.launch_lagged). Returns as run()."""
        self._set_sim_rows(sim_rows)
        r = prev_out.shape[0]
        self.advance(prev_out)
        if self.target.backend.recurrent is not None:
            # the commit consumed the recurrent batch's metadata; the same rows and fresh flags
            # (no request starts fresh in a DECODE step) are set up again
            self.target.prepare_recurrent_again()
        return self._launch(self._bucket_for(r))[:r]

    def advance(self, prev_out: torch.Tensor) -> None:
        """Move the static inputs of the last step (R requests) on to the next one, on the
        device: each request's anchor becomes its bonus token and its positions move by its
        accepted count + 1; the verify rows' KV slots are read from req_to_token at the new
        positions; the key counts of both attention backends grow by the same amount. Padding
        requests and everything that does not depend on the positions (table rows, recurrent
        rows, row offsets) stay as the last fill() left them."""
        r, b = prev_out.shape[0], self.rows
        n = r * b
        delta = prev_out[:, 0] + 1  # [R] int64; read before the replay overwrites prev_out
        t, d = self.target, self.draft
        t.positions[:n] += delta.repeat_interleave(b)
        req_rows = t.backend._meta[0, :r].long().repeat_interleave(b)
        t.loc[:n].copy_(self.worker.runner.req_to_token.table[req_rows, t.positions[:n]])
        delta32 = delta.to(torch.int32)
        t.backend._meta[1, :r] += delta32
        if self.simulate is not None and self.simulate.token_mode == "fixed":
            d.block[:r, 0] = self.simulate.filler_id  # the token the host emitted last
        else:
            d.block[:r, 0].copy_(prev_out[:, 1])
        d.positions[:r] += delta[:, None]
        d.backend._meta[1, :r] += delta32
