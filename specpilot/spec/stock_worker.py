"""The `stock` engine: the block drafter's released algorithm (one draft pass, chain verify).

Same interface as ModelRunner (`info`, `forward(WorkerBatch) -> StepOutput`), so the scheduler
only sees more tokens per step. Per DECODE step, for R requests with anchors at positions s_r:
  1. draft:  block [anchor, MASK x (Bd-1)] at positions s_r.. through the drafter, over the draft
             KV (context rows 0..s_r-1); proposals d (P = B - 1 per request) and their q;
  2. verify: the target over [anchor, d] (B rows) at positions s_r..s_r+B-1, capturing the
             features of target_layer_ids; logits -> p for every row;
  3. accept: greedy (prefix match + bonus) or rejection sampling, per request;
  4. commit: features of rows 0..a_r become draft context at their positions; the scheduler
             frees the target KV of rows a_r+1.. (rollback by length).
With CUDA graphs, a greedy step without forcing runs 1-4 as one graph replay (spec/step_graph.py,
accept and commit on device); other steps use the separate VERIFY and drafter-block graphs.
Prefill (EXTEND) runs the target with feature capture and stores every prompt row's context.
Penalties are applied once per verify step to all rows (relaxed, as SGLang does).
"""

from __future__ import annotations

import dataclasses
import logging

import torch

from specpilot.config import DRAFT_WEIGHT_FORMATS
from specpilot.core import ForwardMode, StepOutput, WorkerBatch
from specpilot.engine.kv_cache import KVCache
from specpilot.engine.model_runner import copy_to_host_async, forced_checks
from specpilot.engine.sampler import (SamplingBatch, _h2d, _mix, probs, sample,
                                      seeded_exponential_, seeded_uniform_)
from specpilot.spec.accept import greedy_accept, rejection_accept
from specpilot.spec.draft_attention import DraftAttentionBackend
from specpilot.spec.draft_loader import load_drafter
from specpilot.spec.propose import Proposal, propose
from specpilot.spec.simulate import SimulatedAcceptance

log = logging.getLogger(__name__)


class StockSpecWorker:
    def __init__(self, runner, draft_model_path: str, num_draft_tokens: int | None = None,
                 algorithm: str | None = None, load_format: str = "auto",
                 weight_format: str = "same"):
        """weight_format: the drafter's linear layers: "same" as the target's, "bf16" dense,
        "w12" converted (--speculative-draft-weight-format)."""
        self.runner = runner
        if weight_format not in DRAFT_WEIGHT_FORMATS:
            raise ValueError(f"draft weight format must be one of {DRAFT_WEIGHT_FORMATS}, got "
                             f"{weight_format!r}")
        w12 = runner.weight_format == "w12" if weight_format == "same" else weight_format == "w12"
        self.drafter = load_drafter(draft_model_path, runner.model, runner.dtype, runner.device,
                                    runner.max_positions, load_format, fuse_context_kv=not w12)
        if w12:
            from specpilot.engine.model_runner import to_w12

            log.info("W12 drafter: context K/V stays one GEMM per layer (the all-layer context "
                     "GEMM needs per-layer row views, which a W12 layer cannot give)")
            to_w12(self.drafter, "drafter")
        dc = self.drafter.dc
        if algorithm is not None and algorithm.upper() != dc.algorithm:
            raise ValueError(f"--speculative-algorithm {algorithm} does not match the drafter "
                             f"checkpoint ({dc.architecture} is {dc.algorithm})")
        self.num_draft_tokens = (dc.num_draft_tokens if num_draft_tokens is None
                                 else num_draft_tokens)
        lo, hi = 2, runner.max_positions - runner.info.context_length
        if not lo <= self.num_draft_tokens <= hi:
            raise ValueError(f"--speculative-num-draft-tokens must be in [{lo}, {hi}]")
        if self.num_draft_tokens != dc.num_draft_tokens:
            log.warning("verifying %d rows per step; the drafter was trained with %d",
                        self.num_draft_tokens, dc.num_draft_tokens)
        self.block_rows = self.num_draft_tokens - (1 if dc.shifted_labels else 0)
        c = dc.hf
        attn = self.drafter.layers[0].self_attn
        self.draft_kv = KVCache(c.num_hidden_layers, runner.kv.num_slots, attn.num_kv_heads,
                                attn.head_dim, runner.dtype, runner.device)
        if runner.attention_backend == "triton":
            from specpilot.engine.triton_backend import TritonDraftAttentionBackend

            self.backend = TritonDraftAttentionBackend(self.draft_kv, runner.req_to_token)
        else:
            self.backend = DraftAttentionBackend(self.draft_kv, runner.req_to_token)
        self.verify_graphs = None  # TargetGraphs of VERIFY (B rows per request)
        self.draft_graphs = None  # DraftGraphs of the block pass
        self.step_graphs = None  # StockStepGraphs: the whole greedy step
        self.capture = dc.target_layer_ids
        self.simulate = SimulatedAcceptance.from_env()
        self.proposer = propose  # (drafter, hidden, anchors, sampling rows, wb) -> Proposal
        self.info = dataclasses.replace(runner.info, decode_len=self.num_draft_tokens,
                                        speculative_algorithm=dc.algorithm)
        log.info("stock %s: %s, %d verify rows per step, drafter layers %d, target layers %s",
                 dc.algorithm, dc.architecture, self.num_draft_tokens, c.num_hidden_layers,
                 list(self.capture))

    def enable_cuda_graphs(self, max_bs: int, capture: bool = True, draft: bool = True,
                           step: bool = True) -> None:
        """Capture the target's VERIFY forward (B rows per request, features captured) and, with
        `draft`, the drafter's block pass, for batch buckets up to max_bs; with `draft` and
        `step`, also the whole greedy step (StockStepGraphs: draft, propose, verify, accept,
        commit and context store in one replay), which serves every all-greedy step without
        forcing. Otherwise proposal, accept, commit and the context store run eagerly
        (--disable-draft-cuda-graph: the block pass too)."""
        from specpilot.engine.cuda_graph import DraftGraphs, TargetGraphs
        from specpilot.spec.step_graph import StockStepGraphs

        self.verify_graphs = TargetGraphs(self.runner, self.num_draft_tokens, self.capture,
                                          max_bs=max_bs, capture=capture)
        if draft:
            self.draft_graphs = DraftGraphs(self, max_bs=max_bs, capture=capture)
            if step:
                self.step_graphs = StockStepGraphs(self, capture=capture)

    @torch.inference_mode()
    def forward(self, wb: WorkerBatch) -> StepOutput:
        if wb.mode == ForwardMode.EXTEND:
            return self._extend(wb)
        return self._decode(wb)

    def _store_context(self, aux, positions, loc):
        self.drafter.store_context(aux, positions, self.backend.prepare_context(loc))

    def _extend(self, wb: WorkerBatch) -> StepOutput:
        rn = self.runner
        loc = rn.tensor(wb.out_cache_loc)
        hidden, aux = rn.run_target(wb.req_pool_indices, wb.prefix_lens, wb.extend_lens,
                                    rn.tensor(wb.input_ids), loc, self.capture)
        positions = rn.tensor([p + j for p, e in zip(wb.prefix_lens, wb.extend_lens)
                               for j in range(e)])
        self._store_context(aux, positions, loc)
        last = rn.tensor(wb.extend_lens).cumsum(0) - 1
        logits = rn.model.compute_logits(hidden[last])
        if wb.forced is not None:
            return StepOutput(wb.forced, checks=[[c] for c in forced_checks(logits)])
        tokens = sample(logits, rn.sampling_batch(wb)).tolist()
        return StepOutput([[t] for t in tokens])

    def _row_batch(self, wb: WorkerBatch, n: int) -> SamplingBatch:
        """SamplingBatch with n rows per request; row j of request i is its step steps[i] + j."""
        rep = lambda xs: [x for x in xs for _ in range(n)]  # noqa: E731
        steps = [s + j for s in wb.steps for j in range(n)]
        hist = None if wb.histories is None else rep(wb.histories)
        return SamplingBatch.from_params(rep(wb.sampling), steps, hist,
                                         self.runner.info.vocab_size, self.runner.device,
                                         banned_until_min=rep(wb.banned))

    @staticmethod
    def _greedy(wb: WorkerBatch) -> bool:
        """Every request greedy, without penalties or banned tokens: accept by argmax."""
        return all(sp.greedy for sp in wb.sampling) and not wb.histories and not any(wb.banned)

    def _step_graph_serves(self, wb: WorkerBatch) -> bool:
        """A greedy DECODE step without forcing, in a bucket of the whole-step graph."""
        sg = self.step_graphs
        return (wb.mode == ForwardMode.DECODE and sg is not None and self._greedy(wb)
                and wb.forced is None and sg.bucket(wb.batch_size) is not None)

    def _run_step_graph(self, wb: WorkerBatch) -> torch.Tensor:
        """Queue the step in the whole-step graph; int64 [R, 2 + P] on the device."""
        rn = self.runner
        sim = None if self.simulate is None else self.simulate.draw(self.num_draft_tokens)
        return self.step_graphs.run(wb.req_pool_indices, wb.prefix_lens,
                                    rn.tensor(wb.input_ids), rn.tensor(wb.out_cache_loc), sim)

    def _decode(self, wb: WorkerBatch) -> StepOutput:
        rn, dc = self.runner, self.drafter.dc
        r, b, bd = wb.batch_size, self.num_draft_tokens, self.block_rows
        if self._step_graph_serves(wb):
            return self._output(self._run_step_graph(wb).tolist())  # the one device-to-host copy
        anchors = rn.tensor(wb.input_ids)  # [R]
        greedy = self._greedy(wb)
        starts = rn.tensor(wb.prefix_lens)  # [R] anchor positions
        offs = torch.arange(b, device=rn.device)
        # 1. draft
        if self.draft_graphs is not None and self.draft_graphs.bucket(r) is not None:
            hidden = self.draft_graphs.run(wb.req_pool_indices, wb.prefix_lens, anchors)
        else:
            block = torch.full((r, bd), dc.mask_token_id, dtype=torch.int64, device=rn.device)
            block[:, 0] = anchors
            self.backend.prepare_block(wb.req_pool_indices, wb.prefix_lens, bd)
            hidden = self.drafter(block, starts[:, None] + offs[None, :bd], self.backend)
        sb = None if greedy else self._row_batch(wb, b - 1)
        prop = self.proposer(self.drafter, hidden, anchors, sb, wb)
        if wb.forced is not None:  # token forcing: the forced tokens are the drafts
            forced = [(f + [0] * b)[:b - 1] for f in wb.forced]
            prop = Proposal(torch.tensor(forced, device=rn.device), None)
        # 2. verify
        ids = torch.cat([anchors[:, None], prop.tokens], dim=1)  # [R, B]
        loc = rn.tensor(wb.out_cache_loc)
        if self.verify_graphs is not None and self.verify_graphs.bucket(r) is not None:
            logits, aux = self.verify_graphs.run(wb.req_pool_indices, wb.prefix_lens,
                                                 ids.reshape(-1), loc)
        else:
            th, aux = rn.run_target(wb.req_pool_indices, wb.prefix_lens, [b] * r,
                                    ids.reshape(-1), loc, self.capture, verify=True)
            logits = rn.model.compute_logits(th)  # [R*B, V]
        if wb.forced is not None:  # every forced token is emitted: rows 0..len-1 commit
            checks = forced_checks(logits)
            acc = [len(f) - 1 for f in wb.forced]
            self._commit(aux, starts, loc, acc)
            return StepOutput(wb.forced, num_accepted=acc, num_proposed=b - 1,
                              checks=[checks[i * b:(i + 1) * b] for i in range(r)])
        # 3. accept
        if greedy:
            accepted, nxt = greedy_accept(prop.tokens, logits.argmax(-1).view(r, b))
        else:
            p = probs(logits, self._row_batch(wb, b)).view(r, b, -1)
            q = prop.q if prop.q is not None else torch.nn.functional.one_hot(
                prop.tokens, p.shape[-1]).float()
            accepted, nxt = rejection_accept(prop.tokens, q, p, *self._randomness(wb, r, b, p))
        if self.simulate is not None:
            rows = torch.tensor([self.simulate.draw(b)], device=rn.device)
            accepted, nxt = self.simulate.accept(logits.argmax(-1).view(r, b), rows)
        early = rn.commit_takes_device_counts()
        if early:  # queue the commit before the copy below: its launches overlap the GPU's work
            self._commit(aux, starts, loc, accepted)
        # the step's one device-to-host copy: accepted counts, bonus tokens and drafts together
        host = torch.cat([accepted[:, None], nxt[:, None], prop.tokens], dim=1).tolist()
        if not early:
            self._commit(aux, starts, loc, [row[0] for row in host])
        return self._output(host)

    # ---------------------------------------------------------------- overlap
    # With the overlap scheduler (the default) the scheduler queues greedy step k+1 before it reads step k
    # (scheduler.py, "overlap"). Step k+1's inputs are step k's on the device, moved on by its
    # accepted counts: anchors = bonus tokens, positions + (accepted + 1), KV slots gathered
    # from req_to_token at the new positions (StockStepGraphs.advance). The scheduler
    # allocates the KV slots of positions anchor + B .. anchor + 2B - 1 first (the rows step k
    # did not cover), since step k+1's rows start anywhere in anchor + 1 .. anchor + B.

    def launch_decode(self, wb: WorkerBatch, input_ids=None) -> "SpecPending":
        """A DECODE step for the overlap scheduler. A greedy step that the whole-step graph
        serves is queued and comes back unread (SpecPending.chainable: launch_lagged can follow
        it); any other step runs as forward() and comes back read."""
        if input_ids is not None:
            raise ValueError("the stock worker takes its next anchors from launch_lagged")
        if not self._step_graph_serves(wb):
            return SpecPending(self, done=self.forward(wb))
        return SpecPending(self, out=self._run_step_graph(wb), rows=list(wb.req_pool_indices))

    def launch_lagged(self, prev: "SpecPending", positions: list[int],
                      slots: list[int]) -> "SpecPending":
        """The next greedy step of prev's requests (same requests, same order), queued before
        prev's results reach the host. positions, slots: the KV slots of the positions prev
        did not cover (B per request, request-major), written into req_to_token here."""
        if not prev.chainable:
            raise ValueError("launch_lagged follows a step the whole-step graph ran")
        rn, b = self.runner, self.num_draft_tokens
        rows = [row for row in prev.rows for _ in range(b)]
        if not len(positions) == len(slots) == len(rows):
            raise ValueError(f"{len(rows)} new KV slots expected, got {len(positions)} / "
                             f"{len(slots)}")
        rows, positions, slots = _h2d([rows, positions, slots], torch.int64, rn.device)
        rn.req_to_token.write(rows, positions, slots)  # one host-to-device copy
        sim = None if self.simulate is None else self.simulate.draw(b)
        out = self.step_graphs.run_lagged(prev.out, sim)
        return SpecPending(self, out=out, rows=prev.rows)

    def _output(self, host: list[list[int]]) -> StepOutput:
        """host rows [accepted, bonus, drafts...] -> the step's tokens per request."""
        acc = [row[0] for row in host]
        sim = self.simulate
        if sim is not None and sim.token_mode == "fixed":
            tokens = [[sim.filler_id] * (a + 1) for a in acc]
        else:
            tokens = [row[2:2 + row[0]] + [row[1]] for row in host]
        return StepOutput(tokens, num_accepted=acc, num_proposed=self.num_draft_tokens - 1)

    def _commit(self, aux, starts, loc, accepted: list[int] | torch.Tensor) -> None:
        """Rows 0..accepted[i] of request i become committed: the target's recurrent state (if
        any; accepted as a host list, or as a device tensor where the runner reads counts on
        device, so no sync) and the drafter's context K/V. aux/loc [R*B], starts [R].
        The drafter stores all B rows: rows past a request's accepted ones sit at positions >=
        its next context length, which no later step reads before overwriting them (the block
        pass reads positions below the anchor only)."""
        rn, b = self.runner, self.num_draft_tokens
        rn.commit_verify(accepted)
        positions = (starts[:, None] + torch.arange(b, device=rn.device)[None, :]).reshape(-1)
        self._store_context(aux, positions, loc)

    def _randomness(self, wb: WorkerBatch, r: int, b: int, p: torch.Tensor):
        """uniform [R, B-1] and Exp(1) noise [R, V]; a seeded request draws from its own stream."""
        dev = self.runner.device
        u = torch.rand(r, b - 1, device=dev)
        e = torch.empty(r, p.shape[-1], device=dev).exponential_()
        rows = [i for i, sp in enumerate(wb.sampling) if sp.seed is not None]
        if rows:  # all seeded rows at once, from counter-based streams (sampler.seeded_uniform_)
            keys = [_mix(wb.sampling[i].seed, wb.steps[i]) ^ 0x5bd1e995 for i in rows]
            seeded_uniform_(u, rows, keys)
            seeded_exponential_(e, rows, keys, offset=b - 1)
        return u, e.clamp_min_(torch.finfo(torch.float32).tiny)


class SpecPending:
    """A stock DECODE step on its way to the host: the step graph's output [R, 2 + P]
    (accepted, bonus, drafts) stays on the device for launch_lagged while a non-blocking copy
    moves it into pinned memory; result() waits for that copy only. done: a step that already
    ran to the host (launch_decode's other steps)."""

    def __init__(self, worker: StockSpecWorker, out: torch.Tensor | None = None,
                 rows: list[int] | None = None, done: StepOutput | None = None):
        self.worker, self.rows, self._done = worker, rows, done
        self.out, self._event = out, None
        if out is not None:
            self._host, self._event = copy_to_host_async(out)

    @property
    def chainable(self) -> bool:
        """Whether a step may be queued behind this one with launch_lagged."""
        return self.out is not None

    def result(self) -> StepOutput:
        if self._done is not None:
            return self._done
        if self._event is not None:
            self._event.synchronize()
        return self.worker._output(self._host.tolist())
