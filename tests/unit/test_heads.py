"""DFlash2's candidate selector: the slot-independent parts prepared for a whole block at once
(spec/heads.py CandidateSelector.prepare / scores_from, used by spec/propose.py) score as the
per-slot formula does."""

from __future__ import annotations

import torch

from specpilot.spec.heads import CandidateSelector


def test_block_prepared_scores_equal_per_slot_scores():
    torch.manual_seed(0)
    r, p, hidden, vocab, rank, k = 3, 5, 24, 50, 8, 4
    sel = CandidateSelector(hidden, vocab, rank)
    with torch.no_grad():
        sel.predecessor_codebook.normal_()
        sel.successor_codebook.normal_()
        h = torch.randn(r, p, hidden)
        unary = torch.randn(r, p, k)
        cand = torch.randint(0, vocab, (r, p, k))
        prev = torch.randint(0, vocab, (r,))
        proj, succ = sel.prepare(h, cand)
        assert proj.shape == (r, p, rank) and succ.shape == (r, p, k, rank)
        for j in range(p):
            want = unary[:, j] + torch.einsum(
                "rk,rck->rc", sel.predecessor_codebook[prev] * sel.hidden_projection(h[:, j]),
                sel.successor_codebook[cand[:, j]])
            got = sel.scores_from(proj[:, j], succ[:, j], unary[:, j], prev)
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
