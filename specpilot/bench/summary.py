"""Benchmark summary arithmetic: per (dataset, concurrency) group, from per-request records.

Pure functions on plain dicts (no I/O). A record is one line of requests.jsonl:
    dataset, id, concurrency, prompt_tokens, completion_tokens, latency_s (client, request sent
    -> last byte), ttft_s (-> first output token), tpot_s, error (None when it succeeded), and
    for speculative engines spec_verify_ct, spec_num_correct_drafts, spec_num_proposed_drafts.
Definitions (as SGLang's bench_serving, see reference/sglang.md §3.12):
    tpot_s             (latency_s - ttft_s) / (completion_tokens - 1); None when <= 1 token
    output_throughput  sum(completion_tokens) / duration_s (wall time of the group)
    request_throughput n_ok / duration_s
    accept_length      sum(completion_tokens) / sum(spec_verify_ct) over the group's own
                       requests (not the server's cumulative gauge); None without speculation.
                       completion_tokens includes the first token (from prefill), as SGLang's.
    accept_rate        sum(spec_num_correct_drafts) / sum(spec_num_proposed_drafts)
Percentiles interpolate linearly between order statistics (numpy's default). Failed requests
(error set) count in `errors` and nowhere else.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional

ALL = "all"  # the dataset name of the per-concurrency rows that pool every dataset


def percentile(xs: list[float], q: float) -> Optional[float]:
    """q in [0, 100]; None for an empty list."""
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def mean(xs: list[float]) -> Optional[float]:
    return sum(xs) / len(xs) if xs else None


def tpot(latency_s: float, ttft_s: Optional[float], completion_tokens: int) -> Optional[float]:
    if ttft_s is None or completion_tokens <= 1:
        return None
    return (latency_s - ttft_s) / (completion_tokens - 1)


def _dist(xs: list[float], prefix: str) -> dict:
    return {f"{prefix}_mean": mean(xs), f"{prefix}_median": percentile(xs, 50),
            f"{prefix}_p90": percentile(xs, 90), f"{prefix}_p99": percentile(xs, 99)}


def summarize_group(records: list[dict], duration_s: float) -> dict:
    ok = [r for r in records if not r.get("error")]
    out_tokens = sum(r["completion_tokens"] for r in ok)
    verify = sum(r.get("spec_verify_ct") or 0 for r in ok)
    proposed = sum(r.get("spec_num_proposed_drafts") or 0 for r in ok)
    correct = sum(r.get("spec_num_correct_drafts") or 0 for r in ok)
    tpots = [t for t in (tpot(r["latency_s"], r.get("ttft_s"), r["completion_tokens"]) for r in ok)
             if t is not None]
    s = {"n": len(ok), "errors": len(records) - len(ok),
         "prompt_tokens": sum(r["prompt_tokens"] for r in ok), "output_tokens": out_tokens,
         "duration_s": duration_s,
         "output_throughput": out_tokens / duration_s if duration_s > 0 else None,
         "request_throughput": len(ok) / duration_s if duration_s > 0 else None,
         "accept_length": out_tokens / verify if verify else None,
         "accept_rate": correct / proposed if proposed else None}
    s.update(_dist([r["latency_s"] for r in ok], "latency_s"))
    s.update(_dist([r["ttft_s"] for r in ok if r.get("ttft_s") is not None], "ttft_s"))
    s.update(_dist(tpots, "tpot_s"))
    return s


def summarize(records: Iterable[dict], durations: dict) -> list[dict]:
    """One row per (dataset, concurrency) in `durations` ({(dataset, c): wall seconds}), then one
    `all` row per concurrency pooling its datasets (duration = the sum of theirs)."""
    records = list(records)
    rows = []
    for (ds, c), dur in sorted(durations.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        group = [r for r in records if r["dataset"] == ds and r["concurrency"] == c]
        rows.append({"dataset": ds, "concurrency": c, **summarize_group(group, dur)})
    for c in sorted({c for _, c in durations}):
        dss = [ds for ds, cc in durations if cc == c]
        if len(dss) > 1:
            group = [r for r in records if r["concurrency"] == c and r["dataset"] in dss]
            dur = sum(durations[(ds, c)] for ds in dss)
            rows.append({"dataset": ALL, "concurrency": c, **summarize_group(group, dur)})
    return sorted(rows, key=lambda r: (r["concurrency"], r["dataset"] == ALL, r["dataset"]))


def _fmt(x, scale: float = 1.0, digits: int = 2) -> str:
    return "-" if x is None else f"{x * scale:.{digits}f}"


def table(rows: list[dict]) -> str:
    """A fixed-width text table of summary rows."""
    head = (f"{'dataset':<10} {'conc':>4} {'n':>4} {'err':>3} {'out tok/s':>10} {'TTFT ms':>9} "
            f"{'TPOT ms':>9} {'lat p50 s':>9} {'acc len':>7} {'acc rate':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['dataset']:<10} {r['concurrency']:>4} {r['n']:>4} {r['errors']:>3} "
                     f"{_fmt(r['output_throughput'], 1, 1):>10} {_fmt(r['ttft_s_median'], 1e3, 1):>9} "
                     f"{_fmt(r['tpot_s_median'], 1e3, 2):>9} {_fmt(r['latency_s_median'], 1, 2):>9} "
                     f"{_fmt(r['accept_length']):>7} {_fmt(r['accept_rate'], 1, 3):>8}")
    return "\n".join(lines)
