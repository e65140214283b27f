"""Compare benchmark runs of one setting (scripts/compare.py).

    python scripts/compare.py speed <setting> [RUN...] [--baseline ar-1] [--results DIR]
                                    [--out PNG] [--n-boot 2000]

RUN names are folders under results/<setting>/ written by bench.sh (default: all of them). The
baseline is --baseline, else the newest `ar-*` run (by its summary date) whose bench options
that shape the outputs (max_new_tokens, output_len, chat_template_kwargs) agree with the other
runs'; a run whose options differ from the baseline's is left out, with a note on stderr.
For every speculative run, per benchmark set and concurrency level (and `all`, the sets pooled):
    speedup   over the baseline on the same prompts: ratio of per-stream token rates with a
              95% paired bootstrap interval (specpilot.bench.stats.speedup)
    out tok/s wall-clock output throughput of the run (and of the baseline)
    TPOT      median time per output token after the first (ms), run and baseline
    acc len   mean accepted tokens per verify step of the run (completion / verify steps)
Prints the table, writes it with the numbers to compare_speed.json and draws compare_speed.png
(one panel per concurrency level) in results/<setting>/ unless --out says where. Every run is
labelled with the acceptance it ran at (real drafter, or simulated tau): a simulated speedup is
never shown as a real one. Exit status 2 on bad arguments or missing runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

from specpilot.bench.stats import speedup
from specpilot.bench.summary import ALL

REPO_ROOT = Path(__file__).resolve().parents[2]


def load_run(folder: Path) -> dict:
    summary = json.loads((folder / "summary.json").read_text())
    recs = [json.loads(l) for l in (folder / "requests.jsonl").read_text().splitlines() if l.strip()]
    return {"name": folder.name, "meta": summary["meta"], "rows": summary["rows"], "records": recs}


def acceptance_label(meta: dict) -> str:
    acc = meta.get("acceptance", {})
    if acc.get("mode") == "simulated":
        return f"simulated tau={acc.get('SGLANG_SIMULATE_ACC_LEN')}"
    if acc.get("mode") == "real":
        return "real, untrained drafter" if "untrained" in str(acc.get("drafter")) else "real"
    return "baseline"


# bench options that change what a prompt's output is: runs compared prompt by prompt must agree
PAIRED_OPTIONS = ("max_new_tokens", "output_len", "chat_template_kwargs")


def option_diff(a: dict, b: dict) -> list[str]:
    """The PAIRED_OPTIONS in which two runs differ, as 'key: a vs b'."""
    oa, ob = a["meta"].get("options", {}), b["meta"].get("options", {})
    return [f"{k}: {oa.get(k)} vs {ob.get(k)}" for k in PAIRED_OPTIONS if oa.get(k) != ob.get(k)]


def pick_baseline(runs: dict, name: Optional[str]) -> str:
    """--baseline, else the newest ar run whose options agree with every other run's (else the
    newest ar run; compare() then leaves out the runs that differ from it)."""
    if name:
        if name not in runs:
            raise ValueError(f"baseline {name!r} is not among the runs {sorted(runs)}")
        return name
    ars = sorted((r for r in runs if runs[r]["meta"]["engine"] == "ar"),
                 key=lambda r: runs[r]["meta"].get("date", ""), reverse=True)
    if not ars:
        raise ValueError("no ar-* run to compare with: run bench.sh <setting> ar-<run> <gpu> first")
    others = [r for r in runs.values() if r["meta"]["engine"] != "ar"]
    return next((a for a in ars if not any(option_diff(runs[a], o) for o in others)), ars[0])


def _paired(base: list[dict], run: list[dict], ds: str, c: int):
    def key(r):
        return (r["dataset"], r["id"])

    pick = lambda recs: {key(r): r for r in recs if r["concurrency"] == c and not r.get("error")  # noqa: E731
                         and (ds == ALL or r["dataset"] == ds) and r["completion_tokens"] > 0}
    a, b = pick(base), pick(run)
    keys = sorted(set(a) & set(b))
    return ([a[k]["completion_tokens"] for k in keys], [a[k]["latency_s"] for k in keys],
            [b[k]["completion_tokens"] for k in keys], [b[k]["latency_s"] for k in keys])


def compare(runs: dict, baseline: str, n_boot: int = 2000, left_out: Optional[dict] = None) -> list[dict]:
    """Rows of every speculative run against the baseline. Other ar runs are not compared; a
    run whose PAIRED_OPTIONS differ from the baseline's is left out (in ``left_out``: name ->
    the differences)."""
    base = runs[baseline]
    brows = {(r["dataset"], r["concurrency"]): r for r in base["rows"]}
    out = []
    for name, run in runs.items():
        if name == baseline or run["meta"]["engine"] == "ar":
            continue
        diff = option_diff(run, base)
        if diff:
            if left_out is not None:
                left_out[name] = diff
            continue
        for row in run["rows"]:
            ds, c = row["dataset"], row["concurrency"]
            b = brows.get((ds, c))
            pairs = _paired(base["records"], run["records"], ds, c)
            if b is None or not pairs[0]:
                continue
            est = speedup(*pairs, n_boot=n_boot)
            out.append({"run": name, "engine": run["meta"]["engine"],
                        "acceptance": acceptance_label(run["meta"]), "dataset": ds,
                        "concurrency": c, "n": est.n, "speedup": est.value,
                        "ci95": [est.lo, est.hi], "out_tok_s": row["output_throughput"],
                        "base_out_tok_s": b["output_throughput"],
                        "tpot_ms": _ms(row["tpot_s_median"]), "base_tpot_ms": _ms(b["tpot_s_median"]),
                        "accept_length": row["accept_length"]})
    return out


def _ms(x):
    return None if x is None else 1e3 * x


def _f(x, d=1):
    return "-" if x is None else f"{x:.{d}f}"


def table(rows: list[dict], baseline: str) -> str:
    head = (f"{'run':<14} {'dataset':<10} {'conc':>4} {'n':>4} {'speedup [95% CI]':>22} "
            f"{'out tok/s':>10} {baseline + ' tok/s':>14} {'TPOT ms':>8} {'base TPOT':>9} {'acc len':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        ci = f"{r['speedup']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]"
        lines.append(f"{r['run']:<14} {r['dataset']:<10} {r['concurrency']:>4} {r['n']:>4} {ci:>22} "
                     f"{_f(r['out_tok_s']):>10} {_f(r['base_out_tok_s']):>14} {_f(r['tpot_ms'], 2):>8} "
                     f"{_f(r['base_tpot_ms'], 2):>9} {_f(r['accept_length'], 2):>7}")
    return "\n".join(lines)


def plot(rows: list[dict], setting: str, baseline: str, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("the plot needs matplotlib: pip install 'specpilot[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = sorted({r["concurrency"] for r in rows})
    runs = list(dict.fromkeys(r["run"] for r in rows))
    fig, axes = plt.subplots(1, len(levels), figsize=(4.5 * len(levels) + 1, 4), squeeze=False)
    width = 0.8 / max(len(runs), 1)
    for ax, c in zip(axes[0], levels):
        sets = list(dict.fromkeys(r["dataset"] for r in rows if r["concurrency"] == c))
        for k, run in enumerate(runs):
            rs = {r["dataset"]: r for r in rows if r["concurrency"] == c and r["run"] == run}
            xs = [i + (k - (len(runs) - 1) / 2) * width for i, ds in enumerate(sets) if ds in rs]
            ys = [rs[ds]["speedup"] for ds in sets if ds in rs]
            err = [[rs[ds]["speedup"] - rs[ds]["ci95"][0] for ds in sets if ds in rs],
                   [rs[ds]["ci95"][1] - rs[ds]["speedup"] for ds in sets if ds in rs]]
            label = f"{run} ({next(iter(rs.values()))['acceptance']})" if rs else run
            ax.bar(xs, ys, width, yerr=err, capsize=3, label=label)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(sets)), sets, rotation=30)
        ax.set_title(f"concurrency {c}")
        ax.set_ylabel(f"speedup over {baseline}")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(f"{setting}: speedup with 95% bootstrap CI")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def speed(args) -> int:
    root = Path(args.results) / args.setting
    if not root.is_dir():
        raise ValueError(f"no results for setting {args.setting!r} in {root}: run bench.sh first")
    names = args.runs or sorted(p.name for p in root.iterdir() if (p / "summary.json").is_file())
    missing = [n for n in names if not (root / n / "summary.json").is_file()]
    if missing:
        raise ValueError(f"no finished run {missing} in {root} (expected summary.json)")
    runs = {n: load_run(root / n) for n in names}
    if args.baseline and args.baseline not in runs and (root / args.baseline / "summary.json").is_file():
        runs[args.baseline] = load_run(root / args.baseline)
    if not any(r["meta"]["engine"] == "ar" for r in runs.values()) and not args.baseline:
        for p in sorted(root.iterdir()):  # runs named without their baseline: take ar from disk
            if p.name.startswith("ar-") and (p / "summary.json").is_file():
                runs[p.name] = load_run(p)
    baseline = pick_baseline(runs, args.baseline)
    if len(runs) < 2:
        raise ValueError(f"nothing to compare with {baseline}: only that run is in {root}")
    left_out: dict = {}
    rows = compare(runs, baseline, args.n_boot, left_out)
    for name, diff in left_out.items():
        print(f"[compare] {name} left out: its options differ from {baseline}'s "
              f"({'; '.join(diff)}); name a matching ar run with --baseline", file=sys.stderr)
    if not rows:
        raise ValueError(f"nothing to compare with {baseline}: no speculative run with the same "
                         f"options and prompts at the same concurrency")
    text = table(rows, baseline)
    print(f"{args.setting}: speedup over {baseline} (per-stream token rate, paired prompts, "
          f"95% bootstrap CI, {args.n_boot} resamples)")
    print(text)
    png = Path(args.out) if args.out else root / "compare_speed.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    (png.with_suffix(".json")).write_text(json.dumps(
        {"setting": args.setting, "baseline": baseline, "rows": rows}, indent=2) + "\n")
    plot(rows, args.setting, baseline, png)
    print(f"[compare] wrote {png} and {png.with_suffix('.json')}", file=sys.stderr)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="compare.py", description="Compare benchmark runs.")
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("speed", help="speedup over ar per benchmark and concurrency, with CIs")
    p.add_argument("setting")
    p.add_argument("runs", nargs="*", help="run folders, e.g. ar-1 stock-1 (default: all)")
    p.add_argument("--baseline", default=None, help="the ar run to compare with")
    p.add_argument("--results", default=str(REPO_ROOT / "results"))
    p.add_argument("--out", default=None, help="PNG path (default results/<setting>/compare_speed.png)")
    p.add_argument("--n-boot", type=int, default=2000)
    args = parser.parse_args(argv)
    try:
        return speed(args)
    except (ValueError, RuntimeError, KeyError, OSError) as e:
        parser.print_usage(sys.stderr)
        print(f"compare.py: error: {e}", file=sys.stderr)
        return 2
