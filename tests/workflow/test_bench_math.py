"""Benchmark summary arithmetic and the paired bootstrap confidence intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specpilot.bench import stats
from specpilot.bench.summary import ALL, percentile, summarize, summarize_group, table, tpot


def rec(ds, c, out, lat, ttft, verify=None, correct=None, proposed=None, error=None, prompt=10):
    r = {"dataset": ds, "id": f"{ds}/{lat}", "concurrency": c, "prompt_tokens": prompt,
         "completion_tokens": out, "latency_s": lat, "ttft_s": ttft, "error": error}
    if verify is not None:
        r.update(spec_verify_ct=verify, spec_num_correct_drafts=correct,
                 spec_num_proposed_drafts=proposed)
    return r


def test_percentile_and_tpot():
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4, 5], 90) == pytest.approx(4.6)
    assert percentile([5, 1, 4, 2, 3], 90) == pytest.approx(np.percentile([1, 2, 3, 4, 5], 90))
    assert tpot(1.0, 0.1, 10) == pytest.approx(0.1)
    assert tpot(1.0, 0.1, 1) is None and tpot(1.0, None, 5) is None


def test_group_arithmetic():
    recs = [rec("gsm8k", 1, 11, 2.0, 0.5, verify=5, correct=6, proposed=60),
            rec("gsm8k", 1, 21, 3.0, 1.0, verify=5, correct=16, proposed=60),
            rec("gsm8k", 1, 0, 0.1, None, error="HTTP 500")]
    s = summarize_group(recs, duration_s=4.0)
    assert (s["n"], s["errors"], s["output_tokens"], s["prompt_tokens"]) == (2, 1, 32, 20)
    assert s["output_throughput"] == pytest.approx(32 / 4.0)
    assert s["request_throughput"] == pytest.approx(2 / 4.0)
    assert s["accept_length"] == pytest.approx(32 / 10)  # sum completion / sum verify steps
    assert s["accept_rate"] == pytest.approx(22 / 120)
    assert s["tpot_s_mean"] == pytest.approx(((2.0 - 0.5) / 10 + (3.0 - 1.0) / 20) / 2)
    assert s["latency_s_median"] == pytest.approx(2.5)
    assert s["ttft_s_p99"] == pytest.approx(0.5 + 0.99 * 0.5)


def test_ar_has_no_acceptance_and_all_rows_pool():
    recs = [rec("gsm8k", 1, 10, 1.0, 0.1), rec("chat", 1, 30, 2.0, 0.2),
            rec("gsm8k", 2, 10, 1.5, 0.2), rec("chat", 2, 30, 2.5, 0.3)]
    rows = summarize(recs, {("gsm8k", 1): 1.0, ("chat", 1): 2.0, ("gsm8k", 2): 1.5, ("chat", 2): 2.5})
    assert [(r["dataset"], r["concurrency"]) for r in rows] == [
        ("chat", 1), ("gsm8k", 1), (ALL, 1), ("chat", 2), ("gsm8k", 2), (ALL, 2)]
    pooled = rows[2]
    assert pooled["n"] == 2 and pooled["output_throughput"] == pytest.approx(40 / 3.0)
    assert all(r["accept_length"] is None and r["accept_rate"] is None for r in rows)
    text = table(rows)
    assert "out tok/s" in text and "13.3" in text


def test_bootstrap_identical_runs_and_known_ratio():
    tok = [100, 120, 80, 90, 110]
    sec = [1.0, 1.3, 0.7, 1.0, 1.1]
    e = stats.speedup(tok, sec, tok, sec)
    assert (e.value, e.lo, e.hi, e.n) == (1.0, 1.0, 1.0, 5)
    e = stats.speedup(tok, sec, tok, [s / 2 for s in sec])  # b twice as fast on every prompt
    assert e.value == pytest.approx(2.0) and e.lo == pytest.approx(2.0) and e.hi == pytest.approx(2.0)


def test_bootstrap_interval_covers_and_is_deterministic():
    rng = np.random.default_rng(1)
    tok = rng.integers(50, 200, size=40)
    sec_a = tok / 20.0 * rng.uniform(0.9, 1.1, size=40)
    sec_b = tok / 30.0 * rng.uniform(0.8, 1.2, size=40)
    e1 = stats.speedup(tok, sec_a, tok, sec_b, seed=0)
    e2 = stats.speedup(tok, sec_a, tok, sec_b, seed=0)
    assert e1 == e2
    assert e1.lo < e1.value < e1.hi and 1.3 < e1.value < 1.7
    assert e1.value == pytest.approx((tok.sum() / sec_b.sum()) / (tok.sum() / sec_a.sum()))
    wide = stats.speedup(tok[:5], sec_a[:5], tok[:5], sec_b[:5])
    assert wide.hi - wide.lo > e1.hi - e1.lo  # fewer prompts, wider interval
    assert "[" in e1.fmt()


def test_bootstrap_edge_cases():
    e = stats.speedup([10], [1.0], [10], [0.5])
    assert (e.value, e.lo, e.hi) == (2.0, 2.0, 2.0)
    with pytest.raises(ValueError):
        stats.speedup([], [], [], [])
    with pytest.raises(ValueError, match="different lengths"):
        stats.bootstrap_ci(stats.ratio_of_rates, [np.ones(3), np.ones(3), np.ones(2), np.ones(3)])
    lo, hi = stats.bootstrap_ci(lambda x: np.mean(x, axis=-1), [np.arange(100.0)], seed=3)
    assert lo < 49.5 < hi and math.isclose(hi - lo, 2 * 1.96 * np.std(np.arange(100.0)) / 10, rel_tol=0.25)
