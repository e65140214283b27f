"""Turn the drafter's block hidden states into P proposals per request, and their q.

    propose(drafter, hidden [R, Bd, H], anchors [R], sb, wb) -> Proposal  (wb: the WorkerBatch)
      tokens [R, P] int64; q [R, P, V] fp32 (the distribution each token was drawn from, after the
      request's temperature / top-k / top-p transform; one-hot for greedy rows) or None when every
      row is greedy.

`sb` is a SamplingBatch with R * P rows, request-major (row r * P + j is slot j of request r), or
None when every row is greedy (no per-step SamplingBatch to build; the CUDA-graph step uses it).
DFlash: P = Bd - 1 (row 0 is the anchor). DSpark: P = Bd (row j proposes the token after slot
j - 1; the anchor row proposes too), with the Markov term from the previous token. DFlash2: P =
Bd - 1, each slot picks among the top-k candidates of the head, rescored by the selector given
the previous choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from specpilot.engine.sampler import SamplingBatch, draw, probs

FUSE_MARKOV = True   # greedy DSpark on CUDA: the Markov walk in Triton (kernels/markov.py)


@dataclass
class Proposal:
    tokens: torch.Tensor  # [R, P]
    q: Optional[torch.Tensor]  # [R, P, V] or None (all greedy)


def _pick(logits: torch.Tensor, sb: Optional[SamplingBatch], rows: slice | torch.Tensor):
    """logits [R, V] for the sampling rows `rows` of sb -> (token [R], q [R, V] or None)."""
    if sb is None or sb.all_greedy:
        return logits.argmax(dim=-1), None
    sub = _rows(sb, rows)
    q = probs(logits, sub)
    return draw(q, sub), q


def _rows(sb: SamplingBatch, idx) -> SamplingBatch:
    """The SamplingBatch restricted to rows idx (tensor of row ids)."""
    from dataclasses import fields, replace

    out = {}
    for f in fields(sb):
        v = getattr(sb, f.name)
        if isinstance(v, torch.Tensor) and f.name not in ("ban_rows", "ban_cols"):
            out[f.name] = v[idx]
        elif f.name in ("rows", "seeds", "generator_seeds"):  # host lists
            out[f.name] = [v[i] for i in idx.tolist()]
    out["ban_rows"] = out["ban_cols"] = None  # drafts are never banned; p enforces the rule
    return replace(sb, **out)


def propose(drafter, hidden: torch.Tensor, anchors: torch.Tensor, sb: Optional[SamplingBatch],
            wb=None) -> Proposal:
    dc = drafter.dc
    r, bd, _ = hidden.shape
    if dc.algorithm == "DSPARK":
        return _sequential(drafter, hidden, anchors, sb, markov=True)
    if dc.algorithm == "DFLASH2":
        return _sequential(drafter, hidden[:, 1:], anchors, sb, markov=False)
    p = bd - 1
    logits = drafter.logits(hidden[:, 1:]).reshape(r * p, -1)  # [R*P, V]
    tok, q = _pick(logits, sb, torch.arange(r * p, device=hidden.device))
    return Proposal(tok.view(r, p), None if q is None else q.view(r, p, -1))


def _sequential(drafter, hidden, anchors, sb, markov: bool) -> Proposal:
    """Left-to-right walk over the P slots of `hidden` [R, P, H], conditioned on the previous token.

    The head runs once over all R*P rows (one read of its weights, not P), and so do DFlash2's
    top-k, its hidden projection and its successor-codebook gather: only the Markov / selector
    term's predecessor part depends on the previous choice. Greedy DFlash2 picks
    among the candidates directly (the best score; among equal scores the higher head logit)
    instead of scattering the scores into a vocabulary-wide row; on CUDA the head's top-k and
    that greedy walk are Triton launches (kernels/topk.py, kernels/selector.py); greedy DSpark's
    walk on CUDA is one Triton launch per slot (kernels/markov.py)."""
    r, p, _ = hidden.shape
    prev = anchors
    toks, qs = [], []
    base = torch.arange(r, device=hidden.device) * p
    greedy = sb is None or sb.all_greedy
    if not markov and greedy and hidden.is_cuda:
        # the head's top-k (kernels/topk.py, no fp32 logits) and the walk (kernels/selector.py)
        # in Triton: three launches besides the GEMMs
        from specpilot.kernels.selector import greedy_walk  # triton: the gpu extra

        sel = drafter.candidate_selector
        unary, cand = drafter.head_topk(hidden, drafter.dc.selector_top_k)  # [R, P, K]
        proj, succ = sel.prepare(hidden, cand)  # [R, P, r], [R, P, K, r]: every slot at once
        return Proposal(greedy_walk(proj, succ, unary, cand, prev, sel.predecessor_codebook),
                        None)
    head = drafter.logits(hidden)  # [R, P, V]
    w2 = drafter.markov_head.markov_w2 if markov else None
    if FUSE_MARKOV and markov and greedy and hidden.is_cuda and isinstance(w2, torch.nn.Linear):
        # the walk in Triton, one launch per slot (kernels/markov.py; a W12 markov_w2 runs the
        # torch walk below)
        from specpilot.kernels.markov import markov_greedy_walk  # triton: the gpu extra

        return Proposal(markov_greedy_walk(head, prev, drafter.markov_head.markov_w1.weight,
                                           w2.weight), None)
    if not markov:
        unary, cand = head.topk(drafter.dc.selector_top_k, dim=-1)  # [R, P, K]
        sel = drafter.candidate_selector
        proj, succ = sel.prepare(hidden, cand)
    for j in range(p):
        logits = head[:, j]  # [R, V]
        if markov:
            logits = logits + drafter.markov_head(prev)
        else:
            score = sel.scores_from(proj[:, j], succ[:, j], unary[:, j], prev)
            if greedy:
                tok = cand[:, j].gather(1, score.argmax(dim=-1, keepdim=True)).squeeze(1)
                toks.append(tok)
                qs.append(None)
                prev = tok
                continue
            logits = torch.full_like(logits, float("-inf")).scatter_(1, cand[:, j], score)
        tok, q = _pick(logits, sb, base + j)
        toks.append(tok)
        qs.append(q)
        prev = tok
    q = None if qs[0] is None else torch.stack(qs, dim=1)
    return Proposal(torch.stack(toks, dim=1), q)

