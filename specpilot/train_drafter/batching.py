"""Batches for drafter training: sequence order and random anchor blocks.

SequenceSampler walks the samples in a fresh random permutation per epoch; its state (epoch,
position, permutation, torch.Generator state) is saved in the trainer state so a resumed run
sees exactly the batches (and anchors) an uninterrupted run would have seen.

make_batch draws, per sequence, K anchors a uniformly without replacement from the completion
region [prompt_len, len - 2] (where the drafter runs at inference: the first anchor is the first
generated token). Block k is [ids[a_k], MASK x (B-1)] at positions a_k .. a_k+B-1; row j >= 1 is
labelled ids[a_k + j] (-100 past the sequence end); row 0 is never labelled. A sequence with
fewer than K candidate anchors repeats its anchors and the repeats are fully unlabelled.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

IGNORE = -100


@dataclass
class Batch:
    input_ids: torch.Tensor  # [N, L] right-padded with 0 (positions 0..L-1)
    attention_mask: torch.Tensor  # [N, L] 1 on real tokens
    anchors: torch.Tensor  # [N, K] anchor positions
    block_ids: torch.Tensor  # [N, K, B] anchor token then mask ids
    labels: torch.Tensor  # [N, K, B] target token of each block row, IGNORE where none

    def to(self, device) -> "Batch":
        return Batch(*(t.to(device, non_blocking=True) for t in (
            self.input_ids, self.attention_mask, self.anchors, self.block_ids, self.labels)))


class SequenceSampler:
    def __init__(self, n: int, seed: int):
        if n <= 0:
            raise ValueError("no training sequences")
        self.n = n
        self.gen = torch.Generator().manual_seed(seed)
        self.epoch, self.pos = 0, 0
        self.perm = torch.randperm(n, generator=self.gen).tolist()

    def next(self, batch_size: int) -> list[int]:
        out = []
        while len(out) < batch_size:
            if self.pos == self.n:
                self.epoch, self.pos = self.epoch + 1, 0
                self.perm = torch.randperm(self.n, generator=self.gen).tolist()
            out.append(self.perm[self.pos])
            self.pos += 1
        return out

    def state_dict(self) -> dict:
        return {"n": self.n, "epoch": self.epoch, "pos": self.pos, "perm": list(self.perm),
                "gen": self.gen.get_state()}

    def load_state_dict(self, st: dict) -> None:
        if st["n"] != self.n:
            raise ValueError(f"sampler state is for {st['n']} sequences, the data has {self.n}")
        self.epoch, self.pos, self.perm = st["epoch"], st["pos"], list(st["perm"])
        self.gen.set_state(st["gen"])


def make_batch(samples: list[dict], idx: list[int], block_size: int, blocks_per_seq: int,
               mask_id: int, gen: torch.Generator) -> Batch:
    """Batch of sequences samples[idx] with `blocks_per_seq` random anchor blocks each."""
    n, k, b = len(idx), blocks_per_seq, block_size
    seqs = [samples[i] for i in idx]
    width = max(len(s["ids"]) for s in seqs)
    input_ids = torch.zeros((n, width), dtype=torch.long)
    attn = torch.zeros((n, width), dtype=torch.long)
    anchors = torch.zeros((n, k), dtype=torch.long)
    labels = torch.full((n, k, b), IGNORE, dtype=torch.long)
    offs = torch.arange(b)
    for r, s in enumerate(seqs):
        ids = torch.tensor(s["ids"], dtype=torch.long)
        length, p = len(ids), s["prompt_len"]
        input_ids[r, :length], attn[r, :length] = ids, 1
        n_cand = length - 1 - p  # anchors p .. length-2
        pick = torch.randperm(n_cand, generator=gen)[:k]
        real = len(pick)
        if real < k:
            pick = pick.repeat((k + real - 1) // real)[:k]
        a = p + pick.sort().values if real == k else p + pick
        anchors[r] = a
        pos = a[:, None] + offs[None, :]  # [K, B]
        valid = (pos < length) & (offs[None, :] >= 1)
        valid[real:] = False
        labels[r] = torch.where(valid, ids[pos.clamp(max=length - 1)], IGNORE)
    block_ids = torch.full((n, k, b), mask_id, dtype=torch.long)
    block_ids[:, :, 0] = torch.gather(input_ids, 1, anchors)
    return Batch(input_ids, attn, anchors, block_ids, labels)
