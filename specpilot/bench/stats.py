"""Paired bootstrap confidence intervals for speedups (numpy; no I/O).

`speedup(...)` compares two runs on the same prompts. For prompt i, run a produced `tok_a[i]`
tokens in `sec_a[i]` seconds (client latency), run b `tok_b[i]` in `sec_b[i]`. The statistic
is the ratio of per-stream token rates

    S = (sum tok_b / sum sec_b) / (sum tok_a / sum sec_a)

(b faster than a: S > 1). At concurrency c with a closed loop, the system throughput is about
c x the per-stream rate, so S also estimates the throughput ratio. The 95% interval is the
percentile bootstrap over prompts, resampled *paired* (the same prompt indices for both runs),
`n_boot` resamples, a fixed seed (reproducible). With fewer than 2 prompts the interval is
(S, S): there is nothing to resample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Estimate:
    value: float
    lo: float
    hi: float
    n: int

    def fmt(self, digits: int = 2) -> str:
        return f"{self.value:.{digits}f} [{self.lo:.{digits}f}, {self.hi:.{digits}f}]"


def ratio_of_rates(tok_a, sec_a, tok_b, sec_b):
    """Reduces over the last axis: [n] -> scalar, [n_boot, n] -> [n_boot]."""
    s = lambda x: np.sum(x, axis=-1)  # noqa: E731
    return (s(tok_b) / s(sec_b)) / (s(tok_a) / s(sec_a))


def bootstrap_ci(stat, arrays: Sequence[np.ndarray], n_boot: int = 2000, alpha: float = 0.05,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile interval of stat over paired resamples; `stat` must reduce over the last axis
    (it gets [n_boot, n] arrays, one resample per row, and returns [n_boot] values)."""
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError("paired bootstrap: arrays of different lengths")
    if n < 2:
        v = float(stat(*arrays))
        return v, v
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    vals = np.asarray(stat(*[a[idx] for a in arrays]), dtype=float)
    vals = vals[np.isfinite(vals)]
    lo, hi = np.quantile(vals, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def speedup(tok_a, sec_a, tok_b, sec_b, n_boot: int = 2000, alpha: float = 0.05,
            seed: int = 0) -> Estimate:
    arrays = [np.asarray(x, dtype=float) for x in (tok_a, sec_a, tok_b, sec_b)]
    if len(arrays[0]) == 0:
        raise ValueError("speedup: no paired prompts")
    value = float(ratio_of_rates(*arrays))
    lo, hi = bootstrap_ci(ratio_of_rates, arrays, n_boot, alpha, seed)
    return Estimate(value, lo, hi, len(arrays[0]))
