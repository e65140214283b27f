"""CUDA graphs for uniform steps: the target forward of DECODE (1 new row per request) and chain
VERIFY (B new rows per request, with feature capture), and the drafter's block pass (Bd rows per
request over its context K/V): TargetGraphs and DraftGraphs.

A step of R requests runs the graph of the smallest captured batch size >= R ("bucket"). All
inputs go through preallocated buffers whose addresses the graph recorded: token ids, positions,
KV slots and the attention metadata (a TritonBackend of its own, so eager EXTEND batches on the
runner's backend never touch them). The bucket's R..bucket-1 padding requests are real, harmless
requests: prefix 0 (so they read no table entry; the last table row is named), their KV written
to the scratch slot 0, their outputs dropped. Inside a target graph: embedding, every layer, the
final norm and the logits of every row; outside: writing the new rows' slots into req_to_token
(as the eager path does) and sampling.

`capture=False` runs exactly the same padded, buffer-based code eagerly: that is how the CPU tests
(Triton interpreter) check the padding logic, and how a GPU run can compare a graph against its
own eager twin. Hybrid targets (recurrent layers) get a TensorRecurrentBatch of their own with
static metadata and, for VERIFY, a static stash sized for the largest bucket; the commit after
acceptance runs eagerly (ModelRunner.commit_verify). Padding requests are fresh (prefix 0), so
their recurrence starts from zeros; their state and conv window land in the spare table row.
"""

from __future__ import annotations

import logging

import torch

from specpilot.engine.sampler import _h2d
from specpilot.engine.state_pool import TensorRecurrentBatch
from specpilot.engine.triton_backend import TritonBackend, TritonDraftAttentionBackend

log = logging.getLogger(__name__)


def default_buckets(max_bs: int) -> list[int]:
    """SGLang-like batch-size buckets up to max_bs: 1, 2, 4, 8, then steps of 8 (16 from 64)."""
    out = [b for b in (1, 2, 4) if b < max_bs]
    b = 8
    while b < max_bs:
        out.append(b)
        b += 8 if b < 64 else 16
    return out + [max_bs]


class _BucketGraphs:
    """Buckets, capture and replay shared by TargetGraphs and DraftGraphs. A subclass sets
    `rows` (per request) and implements _prepare(bs, rows_l, lens) (attention metadata for the
    real requests, then padding ones) and _forward(bs) (the computation over the static
    buffers, returning the outputs to keep)."""

    what = "step"

    def __init__(self, runner, max_bs: int, buckets: list[int] | None):
        self.buckets = sorted(set(buckets or default_buckets(max_bs)))
        self.max_bs = self.buckets[-1]
        self.spare_row = runner.req_to_token.table.shape[0] - 1
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, object] = {}
        self.captured = False

    @torch.inference_mode()
    def _capture_all(self) -> None:
        pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        for bs in sorted(self.buckets, reverse=True):  # largest first: the pool fits the rest
            with torch.cuda.stream(stream):
                for _ in range(2):  # warm-up: Triton compiles / autotunes outside the capture
                    self._prepare(bs, [], [])  # each time: a step may consume it (the commit)
                    self._forward(bs)
                self._prepare(bs, [], [])
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                self.outputs[bs] = self._forward(bs)
            self.graphs[bs] = graph
        torch.cuda.synchronize()
        self.captured = True
        log.info("CUDA graphs captured: %s, %d rows per request, batch sizes %s", self.what,
                 self.rows, self.buckets)

    def bucket(self, batch: int) -> int | None:
        return next((b for b in self.buckets if b >= batch), None)

    def _bucket_for(self, batch: int) -> int:
        bs = self.bucket(batch)
        if bs is None:
            raise ValueError(f"{batch} requests exceed the largest CUDA-graph batch {self.max_bs}")
        return bs

    def _launch(self, bs: int):
        """Replay bucket bs's graph (or run its eager twin) over the filled buffers."""
        if self.captured:
            self.graphs[bs].replay()
            return self.outputs[bs]
        return self._forward(bs)


class TargetGraphs(_BucketGraphs):
    what = "target"

    def __init__(self, runner, rows: int, capture_layers: tuple[int, ...] = (),
                 max_bs: int = 32, buckets: list[int] | None = None, capture: bool = True):
        super().__init__(runner, max_bs, buckets)
        self.runner, self.rows, self.layers = runner, rows, tuple(capture_layers)
        dev = runner.device
        n = self.max_bs * rows
        # one buffer, rows ids / positions / loc (padding rows' KV: scratch slot 0), so a step's
        # host inputs land in it with one copy
        self.inputs = torch.zeros(3, n, dtype=torch.int64, device=dev)
        self.ids, self.positions, self.loc = self.inputs
        self.backend = TritonBackend(runner.kv, runner.req_to_token)
        self.verify = rows > 1  # DECODE graphs advance recurrent state, VERIFY graphs stash
        if runner.states is not None:
            self.backend.recurrent = TensorRecurrentBatch(
                runner.states, runner.dtype, self.max_bs, n if self.verify else None)
        if capture:
            self._capture_all()

    def _prepare(self, bs: int, rows_l: list[int], prefix_lens: list[int]) -> None:
        pad = bs - len(rows_l)
        rows_l, prefix_lens = list(rows_l) + [self.spare_row] * pad, list(prefix_lens) + [0] * pad
        self.backend.prepare(rows_l, prefix_lens, [self.rows] * bs, self.loc[:bs * self.rows],
                             graph=True)
        self._recurrent_args = (rows_l, prefix_lens, [self.rows] * bs, self.verify)
        if self.backend.recurrent is not None:
            self.backend.recurrent.prepare(*self._recurrent_args)

    def prepare_recurrent_again(self) -> None:
        """The recurrent batch's metadata as the last _prepare set it (a VERIFY step's commit
        consumes it; StockStepGraphs.run_lagged replays the same requests)."""
        self.backend.recurrent.prepare(*self._recurrent_args)

    def _forward(self, bs: int):
        n = bs * self.rows
        hidden, aux = self.runner.model(self.ids[:n], self.positions[:n], self.backend, self.layers)
        return self.runner.model.compute_logits(hidden), aux

    def fill(self, rows_l: list[int], prefix_lens: list[int],
             input_ids: torch.Tensor | list[int] | None, loc: torch.Tensor | list[int]) -> int:
        """Write a step's inputs into the static buffers and prepare the metadata; returns the
        bucket. input_ids, loc: [R * rows] device tensors or host lists; host lists travel with
        the positions in one host-to-device copy (ar's decode: one copy for the whole step's
        inputs). input_ids None: the caller writes self.ids (StockStepGraphs does, in its
        graph; fill leaves zeros there). Padding requests: ids 0 at positions 0..rows-1, KV to
        the scratch slot 0."""
        r, k = len(rows_l), self.rows
        bs = self._bucket_for(r)
        n, m, dev = r * k, bs * k, self.runner.device
        zeros = [0] * (m - n)
        pos = [p + j for p in prefix_lens for j in range(k)] + list(range(k)) * (bs - r)
        rows_t = [row for row in rows_l for _ in range(k)] + zeros
        host = [x + zeros if isinstance(x, list) else [0] * m for x in (input_ids, loc)]
        st = _h2d([host[0], pos, host[1], rows_t], torch.int64, dev)  # ids, positions, loc, rows
        self.inputs[:, :m].copy_(st[:3])  # padding rows included
        for buf, x in ((self.ids, input_ids), (self.loc, loc)):
            if isinstance(x, torch.Tensor):  # device inputs over the zeros just written
                buf[:n].copy_(x)
        self.runner.req_to_token.write(st[3, :n], st[1, :n], self.loc[:n])
        self._prepare(bs, rows_l, prefix_lens)
        return bs

    @torch.inference_mode()
    def run(self, rows_l: list[int], prefix_lens: list[int],
            input_ids: torch.Tensor | list[int], loc: torch.Tensor | list[int]):
        """One step for len(rows_l) <= max_bs requests, each with self.rows new rows at
        prefix_lens[i].. (input_ids, loc: [R * rows] device tensors or host lists). Returns (logits [R*rows, V]
        fp32, aux [R*rows, n*H] or None); they are views into graph outputs, valid until the
        next run."""
        n = len(rows_l) * self.rows
        logits, aux = self._launch(self.fill(rows_l, prefix_lens, input_ids, loc))
        if self.verify and self.backend.recurrent is not None:
            self.runner.last_recurrent = self.backend.recurrent  # commit_verify replays from it
        return logits[:n], (None if aux is None else aux[:n])


class DraftGraphs(_BucketGraphs):
    """The drafter's block pass, block_ids [R, Bd] at positions anchor.. -> hidden [R, Bd, H],
    graphed per batch bucket like TargetGraphs (padding requests: context 0). Its own
    TritonDraftAttentionBackend shares the worker's draft KV cache (context rows are stored
    eagerly by the worker, outside the graph)."""

    what = "drafter block"

    def __init__(self, worker, max_bs: int = 32, buckets: list[int] | None = None,
                 capture: bool = True):
        rn, self.worker = worker.runner, worker
        super().__init__(rn, max_bs, buckets)
        self.rows = worker.block_rows
        self.mask_id = worker.drafter.dc.mask_token_id
        self.block = torch.full((self.max_bs, self.rows), self.mask_id, dtype=torch.int64,
                                device=rn.device)
        self.positions = torch.zeros((self.max_bs, self.rows), dtype=torch.int64, device=rn.device)
        self.offs = torch.arange(self.rows, device=rn.device)
        self.backend = TritonDraftAttentionBackend(worker.draft_kv, rn.req_to_token)
        if capture:
            self._capture_all()

    def _prepare(self, bs: int, rows_l: list[int], ctx_lens: list[int]) -> None:
        pad = bs - len(rows_l)
        self.backend.prepare_block(list(rows_l) + [self.spare_row] * pad,
                                   list(ctx_lens) + [0] * pad, self.rows, graph=True)

    def _forward(self, bs: int) -> torch.Tensor:
        return self.worker.drafter(self.block[:bs], self.positions[:bs], self.backend)

    def fill(self, rows_l: list[int], anchor_pos: list[int], anchors: torch.Tensor) -> int:
        """Write a block pass's inputs into the static buffers; returns the bucket."""
        r = len(rows_l)
        bs = self._bucket_for(r)
        starts = torch.tensor(anchor_pos, dtype=torch.int64, device=self.block.device)
        self.block[:r, 0].copy_(anchors)
        self.positions[:r].copy_(starts[:, None] + self.offs)
        if r < bs:
            self.block[r:bs, 0] = self.mask_id  # any id: padding outputs are dropped
            self.positions[r:bs].copy_(self.offs.expand(bs - r, -1))
        self._prepare(bs, rows_l, anchor_pos)
        return bs

    @torch.inference_mode()
    def run(self, rows_l: list[int], anchor_pos: list[int], anchors: torch.Tensor) -> torch.Tensor:
        """Block pass for len(rows_l) requests: anchors [R] at positions anchor_pos (= context
        lengths). Returns hidden [R, Bd, H], a view valid until the next run."""
        return self._launch(self.fill(rows_l, anchor_pos, anchors))[:len(rows_l)]
