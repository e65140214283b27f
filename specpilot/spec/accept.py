"""Accept rules for chain verification: pure functions on tensors, randomness passed in.

Block of one request: anchor + P drafts d_0..d_{P-1}; the target scored P + 1 rows, row i being
its distribution for the token after block row i (so row i judges draft d_i, row P is the bonus).

greedy_accept: a = length of the longest prefix with d_i == argmax_i; emit d_0..d_{a-1} and the
    bonus argmax_a. Equal to what plain greedy decoding emits.
rejection_accept: accept d_i while u_i * q_i(d_i) < p_i(d_i) (i.e. with probability
    min(1, p/q)); at the first rejection a, emit a token drawn from norm(max(p_a - q_a, 0)); if
    all P are accepted, draw the bonus from p_P. The emitted tokens are distributed as the
    target's (Leviathan et al. / Chen et al. speculative sampling).
"""

from __future__ import annotations

import torch


def greedy_accept(draft: torch.Tensor, target_argmax: torch.Tensor):
    """draft [R, P], target_argmax [R, P+1] -> (num_accepted [R], bonus [R])."""
    p = draft.shape[1]
    match = (draft == target_argmax[:, :p]).to(torch.int64)
    accepted = match.cumprod(dim=1).sum(dim=1)  # [R]
    bonus = target_argmax.gather(1, accepted[:, None]).squeeze(1)
    return accepted, bonus


def rejection_accept(draft: torch.Tensor, q: torch.Tensor, p: torch.Tensor,
                     uniform: torch.Tensor, noise: torch.Tensor):
    """draft [R, P]; q [R, P, V]; p [R, P+1, V] (normalized); uniform [R, P] in [0, 1);
    noise [R, V] i.i.d. Exp(1) for the final draw -> (num_accepted [R], next_token [R])."""
    r, n = draft.shape
    px = p[:, :n].gather(2, draft[:, :, None]).squeeze(2)  # [R, P]
    qx = q.gather(2, draft[:, :, None]).squeeze(2)
    ok = (uniform * qx < px).to(torch.int64)
    accepted = ok.cumprod(dim=1).sum(dim=1)  # [R]
    q_pad = torch.cat([q, torch.zeros_like(q[:, :1])], dim=1)  # row P: residual = p itself
    idx = accepted[:, None, None].expand(r, 1, p.shape[2])
    p_a, q_a = p.gather(1, idx).squeeze(1), q_pad.gather(1, idx).squeeze(1)  # [R, V]
    resid = (p_a - q_a).clamp_min(0)
    # p == q up to rounding leaves nothing to draw from: fall back to p (rejection then had
    # probability ~0, so this changes nothing measurable)
    empty = resid.sum(dim=1, keepdim=True) <= 0
    resid = torch.where(empty, p_a, resid)
    return accepted, (resid / noise).argmax(dim=1)
