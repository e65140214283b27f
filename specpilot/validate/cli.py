"""scripts/validate.py: token-forcing validation of one engine of a setting against `ar`.

    python scripts/validate.py <setting> <engine> [--limit N] [--max-new-tokens M]
        [--threshold GAP] [--datasets a,b] [--gpu IDX] [--local-dir DIR] [--results DIR]

Builds the engines in-process (specpilot.offline.OfflineEngine) from the setting's flags, with
the setting's `validate:` block as defaults (prompts per dataset, tokens, near-tie threshold),
runs both directions (specpilot.validate.forcing) and writes
results/<setting>/validate-<engine>/report.json (summary + every disagreement) and
positions.jsonl (per prompt and direction: whether each position agrees, and its top-2 gap).
Exit status: 0 passed, 1 failed (a disagreement that is not a near-tie), 2 bad arguments,
invalid setting or missing checkpoints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Callable, Optional

REPO_ROOT = Path(__file__).resolve().parents[2]


def engine_factory(setting, paths: dict) -> Callable[[str], object]:
    from specpilot.offline import OfflineEngine
    from specpilot.settings import parse_server_args, render_flags

    def make(engine: str):
        args = parse_server_args(render_flags(setting.flags(engine),
                                              {k: str(v) for k, v in paths.items()}))
        return OfflineEngine(args)

    return make


def prompt_items(setting, paths: dict, datasets: list[str], limit: int) -> list[dict]:
    from transformers import AutoTokenizer

    from specpilot.evals import datasets as D

    tok = AutoTokenizer.from_pretrained(str(paths["target"]))
    kw = setting.bench.get("chat_template_kwargs") or {}
    return [{"dataset": ds, "id": it["id"], "input_ids": D.encode(tok, it, kw)}
            for ds in datasets for it in D.select(ds, limit)]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="validate.py",
                                description="Token forcing of an engine against ar (both directions).")
    p.add_argument("setting", help="a folder name under settings/ (or a path)")
    p.add_argument("engine", choices=("ar", "stock", "final"))
    p.add_argument("--limit", type=int, default=None, help="prompts per dataset (validate.num_prompts)")
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.add_argument("--threshold", type=float, default=None,
                   help="near-tie: top-2 logit gap below this (validate.near_tie_gap)")
    p.add_argument("--datasets", default=None, help="comma-separated subset")
    p.add_argument("--gpu", type=int, default=None, help="GPU index (CUDA_VISIBLE_DEVICES)")
    p.add_argument("--local-dir", default=None, help="where download_models.sh put the repos")
    p.add_argument("--results", default=str(REPO_ROOT / "results"))
    return p


def main(argv: Optional[list[str]] = None,
         make_engine: Optional[Callable[[str], object]] = None) -> int:
    """`make_engine` replaces the engines built from the setting (tests inject faulty ones)."""
    from specpilot import settings as S

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        setting = S.load(args.setting)
        v = setting.validate
        limit = v["num_prompts"] if args.limit is None else args.limit
        tokens = v["max_new_tokens"] if args.max_new_tokens is None else args.max_new_tokens
        threshold = v["near_tie_gap"] if args.threshold is None else args.threshold
        datasets = v["datasets"] if args.datasets is None else [d.strip() for d in args.datasets.split(",") if d.strip()]
        if limit < 1 or tokens < 1 or threshold < 0:
            raise ValueError("--limit and --max-new-tokens must be >= 1, --threshold >= 0")
        if not datasets or any(d not in S.DATASETS for d in datasets):
            raise ValueError(f"--datasets: choose from {S.DATASETS}")
        if args.gpu is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
        from specpilot.bench.checkpoints import resolve_paths

        paths = resolve_paths(setting, local_dir=args.local_dir)
        items = prompt_items(setting, paths, datasets, limit)
    except (ValueError, S.SettingsError, FileNotFoundError) as e:
        parser.print_usage(sys.stderr)
        print(f"validate.py: error: {e}", file=sys.stderr)
        return 2
    from tqdm import tqdm

    from specpilot.validate.forcing import report_text, validate

    make = make_engine or engine_factory(setting, paths)
    phases = 6 if args.engine != "ar" else 4
    with tqdm(total=phases, desc=f"validate {args.engine}", unit="phase", file=sys.stderr) as bar:
        def progress(msg):
            if bar.n or msg != "load ar":
                bar.update(1)
            bar.set_postfix_str(msg)

        result = validate(items, make, args.engine, tokens, threshold,
                          keep_loaded=setting.device == "cpu", progress=progress)
        bar.update(bar.total - bar.n)
    out = Path(args.results) / setting.name / f"validate-{args.engine}"
    out.mkdir(parents=True, exist_ok=True)
    dirs = result["directions"]
    with open(out / "positions.jsonl", "w") as f:
        for d in dirs:
            for p in d.per_prompt:
                f.write(json.dumps({"direction": d.name, **p}) + "\n")
    summary = {k: v for k, v in result.items() if k != "directions"}
    summary.update(setting=setting.name, engine_note=setting.engines[args.engine]["note"],
                   directions=[{"name": d.name, "positions": d.positions, "agree": d.agree,
                                "disagreements": d.disagreements} for d in dirs])
    (out / "report.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{setting.name}: {report_text(result)}")
    print(f"[validate] wrote {out / 'report.json'} and positions.jsonl", file=sys.stderr)
    return 0 if result["passed"] else 1
