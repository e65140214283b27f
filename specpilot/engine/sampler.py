"""Batched token sampling on device tensors (CPU or GPU), free of host syncs.

Contract
--------
`SamplingBatch.from_params(...)` turns per-request `SamplingParams` (python values the scheduler
owns) into per-row device tensors once per step. `sample(logits[B, V], batch) -> ids[B] int64`
then runs only tensor ops: no `.item()`, no `.tolist()`, no data-dependent python branches.
Every python flag it branches on (`all_greedy`, `has_top_p`, ...) was computed on the host from
the params, so the only device->host copy is the one the caller makes of the result.
`from_params` moves its host lists through pinned memory with non_blocking copies (no stream
sync on CUDA). `sample` never writes into the caller's logits.

Order of operations (fp32 throughout):
  1. penalties (`apply_penalties`): repetition (HF style, prompt + output tokens: logit > 0 is
     divided by the penalty, logit < 0 multiplied), then frequency (`- f * count`) and presence
     (`- p * (count > 0)`), both over output tokens only;
  2. min_new_tokens: ids in `banned_until_min[i]` get -inf while steps[i] < min_new_tokens;
  3. all rows greedy (temperature < 1e-5 or top_k == 1) -> argmax (fast path);
  4. otherwise per row: greedy rows take argmax; the others divide by temperature, apply top-k,
     top-p (smallest set whose cumulative probability is >= top_p; the top token always stays),
     min-p (drop p < min_p * p_max) and sample with the exponential race argmax(p / E),
     E ~ Exp(1) i.i.d., which draws from p without a cumsum/multinomial host sync.

Seeding: a row with `seed` set draws its E from a counter-based stream keyed by
`_mix(seed, steps[i])` (`seeded_uniform`: a 32-bit integer hash of (key, column), computed for
all seeded rows at once, the same integers on every device), so a request's draws depend only on
(seed, step, V) and not on which other rows share the batch. The keys are hashed on the host in
python ints; on CUDA one Triton launch (kernels/noise.py) writes the seeded rows straight into
the noise tensor, elsewhere torch ops compute the same integers. Unseeded rows use the default
generator.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from specpilot.core import SamplingParams
from specpilot.layers.norm import triton_kernels

_MASK64 = (1 << 64) - 1


def _h2d(data, dtype: torch.dtype, device) -> torch.Tensor:
    """Host list -> device tensor without a stream sync (pinned staging, non_blocking copy)."""
    t = torch.tensor(data, dtype=dtype)
    if torch.device(device).type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def _mix(seed: int, step: int) -> int:
    """Deterministic 63-bit generator seed from (request seed, step): splitmix64 finalizer."""
    z = (seed * 0x9E3779B97F4A7C15 + (step + 1) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) & ((1 << 63) - 1)


@dataclass
class SamplingBatch:
    """Per-row sampling state for one step. B rows, vocabulary V. All tensors on `device`; the
    five per-row parameters (temperature .. min_p) go there on first use, in one copy, so an
    all-greedy step, which only takes the argmax, copies nothing."""

    rows: list[tuple[float, float, float, float, float]]  # host, per row: temperature (1.0 on
    # greedy rows: never divided by zero), greedy (1.0: temperature < 1e-5 or top_k == 1), top_p
    # in (0, 1], top_k in [1, V] (V when off), min_p in [0, 1]
    device: torch.device | str
    repetition_penalty: Optional[torch.Tensor]  # [B] fp32, or None when no row has penalties
    frequency_penalty: Optional[torch.Tensor]  # [B] fp32
    presence_penalty: Optional[torch.Tensor]  # [B] fp32
    output_counts: Optional[torch.Tensor]  # [B, V] fp32: occurrences in the row's output ids
    seen_mask: Optional[torch.Tensor]  # [B, V] bool: token in the row's prompt or output ids
    ban_rows: Optional[torch.Tensor]  # [N] int64: (row, id) pairs set to -inf (min_new_tokens)
    ban_cols: Optional[torch.Tensor]  # [N] int64
    seeds: list[Optional[int]]  # host: request seeds
    generator_seeds: list[Optional[int]]  # host: _mix(seed, step) per seeded row (the key of its
    # seeded_uniform stream), else None
    vocab_size: int
    all_greedy: bool
    has_top_k: bool
    has_top_p: bool
    has_min_p: bool
    max_top_k: int  # largest active top_k (< V) among sampled rows; V if none

    @property
    def batch_size(self) -> int:
        return len(self.rows)

    @functools.cached_property
    def _row_params(self) -> torch.Tensor:
        """[5, B] fp32 on the device (one host-to-device copy; ints up to 2**24 are exact)."""
        cols = [list(c) for c in zip(*self.rows)] or [[] for _ in range(5)]
        return _h2d(cols, torch.float32, self.device).view(5, -1)

    @property
    def temperature(self) -> torch.Tensor:  # [B] fp32
        return self._row_params[0]

    @functools.cached_property
    def greedy(self) -> torch.Tensor:  # [B] bool
        return self._row_params[1] > 0

    @property
    def top_p(self) -> torch.Tensor:  # [B] fp32
        return self._row_params[2]

    @functools.cached_property
    def top_k(self) -> torch.Tensor:  # [B] int64
        return self._row_params[3].long()

    @property
    def min_p(self) -> torch.Tensor:  # [B] fp32
        return self._row_params[4]

    @property
    def has_penalties(self) -> bool:
        return self.output_counts is not None

    @classmethod
    def from_params(
        cls,
        params: Sequence[SamplingParams],
        steps: Sequence[int],
        token_histories: Optional[Sequence[tuple[list[int], list[int]]]],
        vocab_size: int,
        device: torch.device | str,
        banned_until_min: Optional[Sequence[list[int]]] = None,
    ) -> "SamplingBatch":
        """Build the batch. `steps[i]`: tokens row i has generated so far. `token_histories[i]`:
        (prompt_ids, output_ids) of row i, required only when some row has penalties.
        `banned_until_min[i]`: ids banned while steps[i] < params[i].min_new_tokens (the row's
        EOS ids + stop_token_ids); None means nothing is banned."""
        B, V = len(params), vocab_size
        assert len(steps) == B, (len(steps), B)
        assert V <= 1 << 24, f"vocabulary {V} > 2**24: top_k would not be exact in fp32"
        greedy = [p.greedy for p in params]
        top_k = [V if (p.top_k < 0 or p.top_k > V) else p.top_k for p in params]
        sampled = [i for i in range(B) if not greedy[i]]

        def f32(xs):
            return _h2d(xs, torch.float32, device)

        rep = freq = pres = counts = seen = None
        if any(p.has_penalties for p in params):
            assert token_histories is not None and len(token_histories) == B, \
                "token_histories is required when a row has penalties"
            rep = f32([p.repetition_penalty for p in params])
            freq = f32([p.frequency_penalty for p in params])
            pres = f32([p.presence_penalty for p in params])
            out_r, out_c, seen_r, seen_c = [], [], [], []
            for i, (prompt_ids, output_ids) in enumerate(token_histories):
                if not params[i].has_penalties:
                    continue
                out_r += [i] * len(output_ids)
                out_c += list(output_ids)
                seen_r += [i] * (len(prompt_ids) + len(output_ids))
                seen_c += list(prompt_ids) + list(output_ids)
            idx = lambda xs: _h2d(xs, torch.int64, device)  # noqa: E731
            counts = torch.zeros(B, V, dtype=torch.float32, device=device)  # [B, V]
            counts.index_put_((idx(out_r), idx(out_c)),
                              torch.ones(len(out_r), dtype=torch.float32, device=device),
                              accumulate=True)
            seen = torch.zeros(B, V, dtype=torch.bool, device=device)  # [B, V]
            seen.index_put_((idx(seen_r), idx(seen_c)),  # device-side fill: no scalar copy
                            torch.ones((), dtype=torch.bool, device=device))

        ban_rows = ban_cols = None
        if banned_until_min is not None:
            assert len(banned_until_min) == B
            rows, cols = [], []
            for i, ids in enumerate(banned_until_min):
                if steps[i] < params[i].min_new_tokens:
                    keep = [t for t in ids if 0 <= t < V]
                    rows += [i] * len(keep)
                    cols += keep
            if rows:
                ban_rows, ban_cols = _h2d(rows, torch.int64, device), _h2d(cols, torch.int64, device)

        seeds = [p.seed for p in params]
        return cls(
            rows=[(1.0 if greedy[i] else float(p.temperature), float(greedy[i]), float(p.top_p),
                   float(top_k[i]), float(p.min_p)) for i, p in enumerate(params)],
            device=device,
            repetition_penalty=rep, frequency_penalty=freq, presence_penalty=pres,
            output_counts=counts, seen_mask=seen, ban_rows=ban_rows, ban_cols=ban_cols,
            seeds=seeds,
            generator_seeds=[None if (s is None or greedy[i]) else _mix(s, steps[i])
                             for i, s in enumerate(seeds)],
            vocab_size=V,
            all_greedy=not sampled,
            has_top_k=any(top_k[i] < V for i in sampled),
            has_top_p=any(params[i].top_p < 1.0 for i in sampled),
            has_min_p=any(params[i].min_p > 0.0 for i in sampled),
            max_top_k=max([top_k[i] for i in sampled if top_k[i] < V], default=V),
        )


def apply_penalties(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """Penalized copy of `logits` [B, V] fp32 (see module docstring); identity without penalties."""
    if not batch.has_penalties:
        return logits
    rep = batch.repetition_penalty[:, None]  # [B, 1]
    repeated = torch.where(logits > 0, logits / rep, logits * rep)  # [B, V]
    logits = torch.where(batch.seen_mask, repeated, logits)
    counts = batch.output_counts  # [B, V]
    logits = logits - batch.frequency_penalty[:, None] * counts
    logits = logits - batch.presence_penalty[:, None] * (counts > 0).to(logits.dtype)
    return logits


def _filtered_probs(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """Temperature, top-k, top-p, min-p on `logits` [B, V] fp32 -> unnormalized probs [B, V]."""
    B, V = logits.shape
    logits = logits / batch.temperature[:, None]
    neg_inf = torch.finfo(logits.dtype).min  # finite: keeps softmax NaN-free
    if batch.has_top_p:
        # One descending sort serves both top-k and top-p.
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # [B, V] each
        # top-k by value, as the top-k-only path below: ties with the k-th logit stay (a row
        # must not depend on whether another row of its batch has top_p < 1)
        kth = sorted_logits.gather(1, (batch.top_k.clamp(max=V) - 1)[:, None])  # [B, 1]
        sorted_logits = sorted_logits.masked_fill(sorted_logits < kth, neg_inf)
        sorted_probs = sorted_logits.softmax(dim=-1)  # [B, V]
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # [B, V]
        # rank 0 has mass_before 0 < top_p, so the top token is always kept; rows with top_p == 1
        # drop nothing (fp32 cumsum may reach 1.0 early), so a row never depends on its batch.
        drop = (mass_before >= batch.top_p[:, None]) & (batch.top_p < 1.0)[:, None]
        sorted_logits = sorted_logits.masked_fill(drop, neg_inf)
        logits = torch.empty_like(logits).scatter_(1, order, sorted_logits)
    elif batch.has_top_k:
        k = min(batch.max_top_k, V)
        top_vals = logits.topk(k, dim=-1).values  # [B, k] descending
        kth = top_vals.gather(1, (batch.top_k.clamp(max=k) - 1)[:, None])  # [B, 1]
        on = (batch.top_k <= k)[:, None]  # [B, 1]; rows with top-k off (k == V) keep all
        logits = logits.masked_fill(on & (logits < kth), neg_inf)
    probs = logits.softmax(dim=-1)  # [B, V]
    if batch.has_min_p:
        p_max = probs.max(dim=-1, keepdim=True).values  # [B, 1]
        probs = probs.masked_fill(probs < batch.min_p[:, None] * p_max, 0.0)
    return probs


_M32 = 0xFFFFFFFF
_HASH_MUL = 0x045D9F3B  # < 2**27: a 32-bit value times it stays below 2**63 (no int64 overflow)


def _hash32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer mixing hash (xorshift-multiply, 2 rounds) on int64 tensors holding values
    in [0, 2**32), in place; bijective on 32 bits."""
    for _ in range(2):
        x.bitwise_xor_(x >> 16).mul_(_HASH_MUL).bitwise_and_(_M32)
    return x.bitwise_xor_(x >> 16)


def _hash32_int(x: int) -> int:
    """_hash32 of one python int in [0, 2**32)."""
    for _ in range(2):
        x = ((x ^ (x >> 16)) * _HASH_MUL) & _M32
    return x ^ (x >> 16)


def _row_hash(key: int) -> int:
    """The 32-bit hash a row's stream is keyed by: both halves of the 64-bit key, mixed."""
    key = int(key) & _MASK64
    return _hash32_int((key & _M32) ^ _hash32_int(key >> 32))


@functools.lru_cache(maxsize=8)
def _column_hashes(offset: int, n: int, device: str) -> torch.Tensor:
    """_hash32 of the counters offset .. offset + n - 1, on `device` (cached: the vocabulary
    size and the few offsets in use repeat every step)."""
    return _hash32(torch.arange(offset, offset + n, dtype=torch.int64) & _M32).to(device)


def _seeded_(out: torch.Tensor, rows: Sequence[int], keys: Sequence[int], offset: int,
             exponential: bool) -> torch.Tensor:
    """out[rows[i]] <- keys[i]'s uniforms (or -log of them), columns offset .. offset + n - 1.
    CUDA (layers.norm.triton_kernels): one Triton launch after one small host->device copy (row
    hashes and rows); elsewhere the torch ops of the reference path."""
    if not rows:
        return out
    hashes = [_row_hash(k) for k in keys]
    kernels = triton_kernels(out, "noise")
    if kernels is not None:
        return kernels.seeded_noise_(out, _h2d([hashes, list(rows)], torch.int64, out.device),
                                     offset, exponential)
    u = _seeded_uniform_torch(hashes, out.shape[1], out.device, offset)
    out[_h2d(list(rows), torch.int64, out.device)] = u.log_().neg_() if exponential else u
    return out


def _seeded_uniform_torch(hashes: list[int], n: int, device, offset: int) -> torch.Tensor:
    """[len(hashes), n] uniforms of the row hashes with torch ops (about 15, whatever the number
    of rows)."""
    rows = _h2d(hashes, torch.int64, device)[:, None]  # [R, 1] in [0, 2**32)
    x = _hash32(rows ^ _column_hashes(offset, n, str(torch.device(device)))[None, :])
    return ((x >> 9).to(torch.float32) + 0.5) * (1.0 / (1 << 23))


def seeded_uniform(keys: Sequence[int], n: int, device, offset: int = 0) -> torch.Tensor:
    """[len(keys), n] float32 uniforms in (0, 1): row r, column c is a hash of (keys[r], offset +
    c), so a row depends on its key alone, never on the other rows, and every device computes the
    same values (23 bits: (h + 1/2) / 2**23 is exact in fp32 and stays below 1). One batched
    computation for all rows (the keys are mixed on the host in python ints, then one Triton
    launch on CUDA, about 15 torch ops elsewhere): no per-row generator, no per-row launches."""
    out = torch.empty(len(keys), n, dtype=torch.float32, device=device)
    return _seeded_(out, range(len(keys)), keys, offset, exponential=False)


def seeded_uniform_(out: torch.Tensor, rows: Sequence[int], keys: Sequence[int],
                    offset: int = 0) -> torch.Tensor:
    """out[rows[i]] <- seeded_uniform(keys[i:i+1], out.shape[1], offset), in place."""
    return _seeded_(out, rows, keys, offset, exponential=False)


def seeded_exponential_(out: torch.Tensor, rows: list[int], keys: Sequence[int],
                        offset: int = 0) -> torch.Tensor:
    """out[rows[i]] <- Exp(1) draws of keys[i]'s stream (-log of seeded_uniform), in place."""
    return _seeded_(out, rows, keys, offset, exponential=True)


def _exponential_noise(batch: SamplingBatch, shape: tuple[int, int], device) -> torch.Tensor:
    """E ~ Exp(1) of `shape` [B, V]; seeded rows from their keys' counter-based streams."""
    noise = torch.empty(shape, dtype=torch.float32, device=device).exponential_()
    rows = [i for i, gseed in enumerate(batch.generator_seeds) if gseed is not None]
    seeded_exponential_(noise, rows, [batch.generator_seeds[i] for i in rows])
    return noise.clamp_min_(torch.finfo(torch.float32).tiny)  # no division by an exact 0


def _adjusted(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """fp32 copy of logits [B, V] with penalties and the min_new_tokens ban applied."""
    assert logits.dim() == 2 and logits.shape[0] == batch.batch_size, tuple(logits.shape)
    logits = logits.float()
    if batch.has_penalties:
        logits = apply_penalties(logits, batch)
    if batch.ban_rows is not None:
        # out of place: logits.float() may alias the caller's tensor
        logits = logits.index_put((batch.ban_rows, batch.ban_cols),
                                  torch.full((), float("-inf"), device=logits.device))
    return logits


def sample(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """logits [B, V] (any float dtype) -> sampled ids [B] int64 on the same device."""
    logits = _adjusted(logits, batch)
    argmax = logits.argmax(dim=-1)  # [B]
    if batch.all_greedy:
        return argmax
    probs = _filtered_probs(logits, batch)  # [B, V]
    noise = _exponential_noise(batch, tuple(probs.shape), probs.device)  # [B, V]
    drawn = (probs / noise).argmax(dim=-1)  # [B]
    return torch.where(batch.greedy, argmax, drawn)


def probs(logits: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """The distribution `sample` draws from, normalized: logits [B, V] -> probs [B, V] fp32.

    Greedy rows get a one-hot at their argmax. Speculative verification uses this for the
    target's p (and, without penalties, for the drafter's q).
    """
    logits = _adjusted(logits, batch)
    onehot = torch.zeros_like(logits).scatter_(1, logits.argmax(dim=-1, keepdim=True), 1.0)
    if batch.all_greedy:
        return onehot
    p = _filtered_probs(logits, batch)
    p = p / p.sum(dim=-1, keepdim=True)
    return torch.where(batch.greedy[:, None], onehot, p)


def draw(p: torch.Tensor, batch: SamplingBatch) -> torch.Tensor:
    """One id per row from (unnormalized) probs [B, V], seeded rows reproducibly."""
    noise = _exponential_noise(batch, tuple(p.shape), p.device)
    return (p / noise).argmax(dim=-1)
