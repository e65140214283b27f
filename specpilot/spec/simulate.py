"""Simulated acceptance for speed work, with SGLang's SGLANG_SIMULATE_ACC_LEN semantics.

SGLANG_SIMULATE_ACC_LEN=x (x > 0): after the real verification, every request of the verify batch
advances by the same n tokens, n drawn once per step with mean x and clamped to [1, B] (n counts
the bonus token, so n - 1 drafts are accepted). SGLANG_SIMULATE_ACC_METHOD:
  match-expected (default): floor(x) or ceil(x), with the probability that makes the mean x;
  multinomial: round(Normal(x, 1)), as SGLang's older builds.
SGLANG_SIMULATE_ACC_TOKEN_MODE:
  real-draft-token (default): the first n - 1 drafts, then the target's token at row n - 1, so
      the KV matches the token ids;
  fixed: n copies of SPECPILOT_SIMULATE_FILLER_ID (default 32, printable in byte-level BPEs).
All draft and verify compute still runs. The output text is not meaningful in this mode.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
from dataclasses import dataclass, field
from typing import Optional

import torch

log = logging.getLogger(__name__)

ENV = "SGLANG_SIMULATE_ACC_LEN"


@contextlib.contextmanager
def simulated_acceptance(mean: Optional[float]):
    """$SGLANG_SIMULATE_ACC_LEN set to ``mean`` inside the block (None: left as it is), restored
    on exit: a stock worker reads it when it is built (``SimulatedAcceptance.from_env``)."""
    old = os.environ.get(ENV)
    if mean is not None:
        os.environ[ENV] = str(mean)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


@dataclass
class SimulatedAcceptance:
    mean: float
    method: str = "match-expected"
    token_mode: str = "real-draft-token"
    filler_id: int = 32
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    @classmethod
    def from_env(cls):
        raw = os.environ.get(ENV, "-1")
        mean = float(raw)
        if mean <= 0:
            return None
        method = os.environ.get("SGLANG_SIMULATE_ACC_METHOD", "match-expected")
        mode = os.environ.get("SGLANG_SIMULATE_ACC_TOKEN_MODE", "real-draft-token")
        if method not in ("match-expected", "multinomial"):
            raise ValueError(f"SGLANG_SIMULATE_ACC_METHOD={method!r}: use match-expected or "
                             "multinomial")
        if mode not in ("real-draft-token", "fixed"):
            raise ValueError(f"SGLANG_SIMULATE_ACC_TOKEN_MODE={mode!r}: use real-draft-token "
                             "or fixed")
        filler = int(os.environ.get("SPECPILOT_SIMULATE_FILLER_ID", "32"))
        log.warning("!!! SIMULATED ACCEPTANCE (SGLANG_SIMULATE_ACC_LEN=%s, %s, %s): speed figures "
                    "only; the output text is NOT meaningful !!!", raw, method, mode)
        return cls(mean, method, mode, filler, random.Random(0))

    def draw(self, b: int) -> int:
        x = self.mean
        if self.method == "multinomial":
            n = round(self.rng.gauss(x, 1.0))
        else:
            lo = math.floor(x)
            n = lo + (1 if self.rng.random() < x - lo else 0)
        return max(1, min(b, n))

    def accept(self, top: torch.Tensor, rows: torch.Tensor):
        """top [R, B]: the target's argmax per verified row; rows: int64 tensor of one element,
        a draw() (a device tensor, so a CUDA graph can take it as input) -> (accepted [R],
        bonus [R]): every request keeps its first rows - 1 drafts and the target's token after
        them. In "fixed" token mode the worker emits filler ids instead (StockSpecWorker._output);
        the verified rows, and so the KV, are the real drafts either way."""
        accepted = (rows - 1).expand(top.shape[0])
        return accepted, top.gather(1, accepted[:, None]).squeeze(1)
