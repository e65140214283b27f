"""Sanity scores of a benchmark run's outputs (scripts/score.py).

    python scripts/score.py <setting> <engine>-<run> [--concurrency C] [--results DIR]
                            [--timeout-s 10] [--memory-mb 512] [--jobs N]

Reads results/<setting>/<engine>-<run>/requests.jsonl (bench.sh) and scores the outputs of one
concurrency level (default: the lowest; greedy outputs should not depend on it, and the report
says how many prompts got a different output at another level):
    gsm8k      numeric answer match         (specpilot.evals.extract.gsm8k_correct)
    math500    boxed answer match            (extract.math500_correct)
    humaneval  the row's unit tests          (extract.humaneval_program, run in the sandbox)
    mbpp       the row's assert tests        (extract.mbpp_program, run in the sandbox)
Code always runs in a subprocess sandbox with time and memory limits (specpilot.evals.sandbox),
never in this process. References come from specpilot.evals.datasets (data/evals/, then
../shared/data/evals/, then the hub when online). chat has no reference and is not scored.
A request that failed (an error in its record) counts as wrong, and each set says how many
failed. Writes scores.jsonl (one line per scored output) and scores.json (per set: n, correct,
accuracy, failed_requests) in the run folder and prints the table. These are sanity checks of
the pipeline, not quality claims (few prompts, short outputs). Exit status: 0, or 2 on bad
arguments / no data.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

from specpilot.evals import datasets as D
from specpilot.evals import extract as X
from specpilot.evals.sandbox import run_python

REPO_ROOT = Path(__file__).resolve().parents[2]


def score_one(rec: dict, ref: dict, timeout_s: float, memory_mb: int) -> dict:
    ds, text = rec["dataset"], rec.get("text") or ""
    out = {"dataset": ds, "id": rec["id"]}
    if rec.get("error"):
        return {**out, "correct": False, "status": "request failed", "stderr": rec["error"]}
    if ds == "gsm8k":
        out.update(pred=X.gsm8k_prediction(text), answer=X.gsm8k_reference(ref["answer"]),
                   correct=X.gsm8k_correct(text, ref["answer"]))
    elif ds == "math500":
        out.update(pred=X.last_boxed(text), answer=ref["answer"],
                   correct=X.math500_correct(text, ref["answer"]))
    else:
        program = (X.humaneval_program if ds == "humaneval" else X.mbpp_program)(text, ref)
        res = run_python(program, timeout_s=timeout_s, memory_mb=memory_mb)
        out.update(correct=res.passed, status=res.status,
                   stderr=None if res.passed else res.stderr[-300:])
    return out


def consistency(records: list[dict], level: int) -> dict:
    """How many prompts' outputs at other concurrency levels differ from those at `level`."""
    base = {(r["dataset"], r["id"]): r.get("output_ids") for r in records if r["concurrency"] == level}
    others = [r for r in records if r["concurrency"] != level and (r["dataset"], r["id"]) in base]
    diff = sum(1 for r in others if r.get("output_ids") != base[(r["dataset"], r["id"])])
    return {"compared": len(others), "different": diff}


def score_run(folder: Path, concurrency: Optional[int] = None, timeout_s: float = 10.0,
              memory_mb: int = 512, jobs: int = 2) -> dict:
    from tqdm import tqdm

    path = folder / "requests.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run bench.sh first")
    records = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    levels = sorted({r["concurrency"] for r in records})
    if not levels:
        raise ValueError(f"{path} holds no request")
    level = levels[0] if concurrency is None else concurrency
    if level not in levels:
        raise ValueError(f"--concurrency {level}: the run has levels {levels}")
    todo = [r for r in records if r["concurrency"] == level and r["dataset"] in D.SCORED]
    refs = {ds: D.by_id(ds) for ds in sorted({r["dataset"] for r in todo})}
    missing = [r["id"] for r in todo if r["id"] not in refs[r["dataset"]]]
    if missing:
        raise ValueError(f"no reference for {missing[:5]} (different data than the benchmark's?)")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futs = [pool.submit(score_one, r, refs[r["dataset"]][r["id"]]["ref"], timeout_s, memory_mb)
                for r in todo]
        scored = [f.result() for f in tqdm(futs, desc="score", unit="output", file=sys.stderr)]
    per_set = {}
    for ds in sorted({s["dataset"] for s in scored}):
        xs = [s for s in scored if s["dataset"] == ds]
        ok = sum(1 for s in xs if s["correct"])
        per_set[ds] = {"n": len(xs), "correct": ok, "accuracy": ok / len(xs),
                       "failed_requests": sum(1 for s in xs if s.get("status") == "request failed")}
    return {"concurrency": level, "sets": per_set, "consistency": consistency(records, level),
            "scored": scored}


def table(result: dict) -> str:
    lines = [f"{'set':<10} {'n':>5} {'correct':>8} {'accuracy':>9} {'failed req':>10}", "-" * 46]
    for ds, s in result["sets"].items():
        lines.append(f"{ds:<10} {s['n']:>5} {s['correct']:>8} {s['accuracy']:>9.3f} "
                     f"{s['failed_requests']:>10}")
    c = result["consistency"]
    lines.append(f"outputs at other concurrency levels identical to level {result['concurrency']}: "
                 f"{c['compared'] - c['different']}/{c['compared']}")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="score.py",
                                     description="Sanity scores of a benchmark run's outputs.")
    parser.add_argument("setting")
    parser.add_argument("run", help="<engine>-<run>, a folder under results/<setting>/")
    parser.add_argument("--concurrency", type=int, default=None, help="level to score (default lowest)")
    parser.add_argument("--results", default=str(REPO_ROOT / "results"))
    parser.add_argument("--timeout-s", type=float, default=10.0, help="per program (sandbox)")
    parser.add_argument("--memory-mb", type=int, default=512, help="per program (sandbox)")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    folder = Path(args.results) / args.setting / args.run
    try:
        result = score_run(folder, args.concurrency, args.timeout_s, args.memory_mb, args.jobs)
    except (FileNotFoundError, ValueError) as e:
        parser.print_usage(sys.stderr)
        print(f"score.py: error: {e}", file=sys.stderr)
        return 2
    with open(folder / "scores.jsonl", "w") as f:
        for s in result["scored"]:
            f.write(json.dumps(s) + "\n")
    summary = {k: v for k, v in result.items() if k != "scored"}
    (folder / "scores.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{args.setting} {args.run}: sanity scores (concurrency {result['concurrency']})")
    print(table(result))
    print(f"[score] wrote {folder / 'scores.json'} and scores.jsonl", file=sys.stderr)
    return 0
