"""Drafter heads that turn block hidden states into proposals.

  CandidateSelector (DFlash2): top-k candidates per slot from the target head, rescored by a
      rank-r predecessor x successor term, walked left to right from the anchor.
  MarkovHead (DSpark, 'vanilla'): logits_j += W2(W1[x_{j-1}]), x_{-1} = the anchor; drafted
      sequentially after one parallel backbone pass.
  ConfidenceHead (DSpark): sigmoid(w . [h_j ; W1[x_{j-1}]] + b), the chance slot j is accepted
      given every earlier slot was. Computed and reported; the stock engine does not act on it.
"""

from __future__ import annotations

import torch
from torch import nn


class CandidateSelector(nn.Module):
    def __init__(self, hidden: int, vocab: int, rank: int):
        super().__init__()
        self.hidden_projection = nn.Linear(hidden, rank, bias=False)
        self.predecessor_codebook = nn.Parameter(torch.zeros(vocab, rank))  # bare tensors
        self.successor_codebook = nn.Parameter(torch.zeros(vocab, rank))

    def scores(self, h: torch.Tensor, unary: torch.Tensor, cand: torch.Tensor,
               prev: torch.Tensor) -> torch.Tensor:
        """h [R, H] of one slot, unary/cand [R, K] candidates, prev [R] predecessor -> [R, K]."""
        return self.scores_from(*self.prepare(h, cand), unary, prev)

    def prepare(self, h: torch.Tensor, cand: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The parts of the scores that do not depend on the predecessor, for any leading dims
        (all slots of a block at once: one GEMM and one gather, not one per slot):
        h [..., H], cand [..., K] -> (projection [..., r], successor rows [..., K, r]) in fp32."""
        return (self.hidden_projection(h).float(), self.successor_codebook[cand].float())

    def scores_from(self, proj: torch.Tensor, succ: torch.Tensor, unary: torch.Tensor,
                    prev: torch.Tensor) -> torch.Tensor:
        """proj [R, r], succ [R, K, r] (prepare's, one slot), unary [R, K], prev [R] -> [R, K]."""
        a = self.predecessor_codebook[prev].float()  # [R, r]
        return unary + torch.einsum("rk,rck->rc", a * proj, succ)


class MarkovHead(nn.Module):
    def __init__(self, vocab: int, rank: int):
        super().__init__()
        self.markov_w1 = nn.Embedding(vocab, rank)
        self.markov_w2 = nn.Linear(rank, vocab, bias=False)

    def forward(self, prev: torch.Tensor) -> torch.Tensor:  # [R] -> [R, V] fp32
        return self.markov_w2(self.markov_w1(prev)).float()


class ConfidenceHead(nn.Module):
    def __init__(self, in_dim: int):
        super().__init__()
        self.proj = nn.Linear(in_dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., in_dim] -> [...] in (0, 1)
        return torch.sigmoid(self.proj(x).float()).squeeze(-1)
