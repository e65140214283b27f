"""The benchmark (scripts/bench.sh): one engine of a setting, every benchmark set, every level.

    python -m specpilot.bench <setting> <engine>-<run> <gpu> [--limit N] [--max-new-tokens M]
        [--concurrency 1,2] [--datasets gsm8k,chat] [--output-len natural|fixed] [--warmup N]
        [--url URL | --port P] [--local-dir DIR] [--results DIR] [--overwrite]

Order: start the server (`serve.sh` command line, log in server.log; or use --url), wait until
it answers, then per concurrency level: warm-up requests at that level (not recorded: kernel
compilation, graph capture and allocator growth happen there), then each dataset's prompts in a
closed loop at that level. Greedy (temperature 0); `natural` stops at EOS (capped at
max_new_tokens), `fixed` ignores EOS and produces exactly max_new_tokens.

Writes results/<setting>/<engine>-<run>/:
    requests.jsonl   one record per measured request (specpilot.bench.client)
    summary.json     run metadata + summary rows (specpilot.bench.summary)
    summary.txt      the table printed at the end
    server.log       the server's output (when this command started it)
Exit status: 0 when every request succeeded, 1 when some failed (files written all the same),
2 on bad arguments, an invalid setting, missing checkpoints or a server that did not start.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import sys
from pathlib import Path
from typing import Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_RE = re.compile(r"^(ar|stock|final)-([A-Za-z0-9][A-Za-z0-9_.]*)$")


def parse_run(s: str) -> tuple[str, str]:
    m = RUN_RE.match(s)
    if not m:
        raise ValueError(f"{s!r} is not <engine>-<run> with engine ar|stock|final and a run name "
                         "of letters, digits, '_' or '.' (e.g. stock-1, ar-base)")
    return m.group(1), m.group(2)


def int_list(s: str) -> list[int]:
    try:
        vals = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None
    if not vals or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {s!r}")
    return vals


def git_commit(root: Path = REPO_ROOT) -> Optional[str]:
    """HEAD's commit read from .git (no git command), or None."""
    try:
        head = (root / ".git" / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        p = root / ".git" / ref
        if p.is_file():
            return p.read_text().strip()
        for line in (root / ".git" / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        pass
    return None


def acceptance_record(setting, engine: str) -> dict:
    if engine == "ar":
        return {"mode": "none (autoregressive)"}
    sim = os.environ.get("SGLANG_SIMULATE_ACC_LEN")
    if sim and float(sim) > 0:
        return {"mode": "simulated", "SGLANG_SIMULATE_ACC_LEN": float(sim),
                "method": os.environ.get("SGLANG_SIMULATE_ACC_METHOD", "match-expected")}
    d = setting.drafter
    label = {"hub": d.repo, "bundled": f"bundled {d.asset} (trained)"}.get(d.source,
                                                                           f"{d.source} (untrained)")
    return {"mode": "real", "drafter": label,
            "revision": d.revision, "data": setting.bench["datasets"]}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench.sh", description="Benchmark one engine of a setting.")
    p.add_argument("setting", help="a folder name under settings/ (or a path)")
    p.add_argument("run", help="<engine>-<run>, e.g. ar-1, stock-1, final-1")
    p.add_argument("gpu", type=int, help="GPU index (port 30000 + gpu); 0 for cpu settings")
    p.add_argument("--limit", type=int, default=None, help="prompts per dataset (bench.num_prompts)")
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.add_argument("--concurrency", type=int_list, default=None, help="levels, e.g. 1,2,4")
    p.add_argument("--datasets", default=None, help="comma-separated subset of the setting's")
    p.add_argument("--output-len", choices=("natural", "fixed"), default=None)
    p.add_argument("--warmup", type=int, default=None, help="warm-up requests per level")
    p.add_argument("--url", default=None, help="use this running server instead of starting one")
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--local-dir", default=None, help="where download_models.sh put the repos")
    p.add_argument("--results", default=str(REPO_ROOT / "results"), help="results root")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run folder")
    p.add_argument("--server-timeout", type=float, default=900.0, help="seconds to wait for it")
    return p


def options(args, setting) -> dict:
    b = dict(setting.bench)
    o = {"datasets": b["datasets"], "num_prompts": b["num_prompts"],
         "concurrency": b["concurrency"], "max_new_tokens": b["max_new_tokens"],
         "output_len": b["output_len"], "warmup_requests": b["warmup_requests"],
         "chat_template_kwargs": b["chat_template_kwargs"]}
    if args.datasets:
        want = [d.strip() for d in args.datasets.split(",") if d.strip()]
        bad = [d for d in want if d not in b["datasets"]]
        if bad or not want:
            raise ValueError(f"--datasets {args.datasets!r}: choose from {b['datasets']}")
        o["datasets"] = want
    for key, flag, val, least in (("num_prompts", "--limit", args.limit, 1),
                                  ("max_new_tokens", "--max-new-tokens", args.max_new_tokens, 1),
                                  ("warmup_requests", "--warmup", args.warmup, 0)):
        if val is not None:
            if val < least:
                raise ValueError(f"{flag} must be >= {least}, got {val}")
            o[key] = val
    o["concurrency"] = args.concurrency or o["concurrency"]
    o["output_len"] = args.output_len or o["output_len"]
    return o


def make_jobs(tokenizer, opts: dict) -> dict[str, list[dict]]:
    from specpilot.evals import datasets as D

    sp = {"temperature": 0.0, "max_new_tokens": opts["max_new_tokens"],
          "ignore_eos": opts["output_len"] == "fixed"}
    jobs = {}
    for ds in opts["datasets"]:
        its = D.select(ds, opts["num_prompts"])
        jobs[ds] = [{"dataset": ds, "id": it["id"], "index": i, "sampling_params": dict(sp),
                     "input_ids": D.encode(tokenizer, it, opts["chat_template_kwargs"])}
                    for i, it in enumerate(its)]
    return jobs


def run(args) -> int:
    from tqdm import tqdm

    from specpilot import settings as S
    from specpilot.bench import serve as SV
    from specpilot.bench.checkpoints import resolve_paths
    from specpilot.bench.client import run_closed_loop
    from specpilot.bench.summary import summarize, table

    engine, run_name = parse_run(args.run)
    setting = S.load(args.setting)
    opts = options(args, setting)
    out = S.caller_path(args.results) / setting.name / args.run   # relative: the caller's
    if (out / "requests.jsonl").exists() and not args.overwrite:
        raise ValueError(f"{out} already holds a run; pick another run name or --overwrite")
    paths = resolve_paths(setting, local_dir=args.local_dir)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(paths["target"]))
    jobs = make_jobs(tokenizer, opts)
    out.mkdir(parents=True, exist_ok=True)
    port = SV.BASE_PORT + args.gpu if args.port is None else args.port
    cmd, server = None, None
    if args.url:
        url = args.url.rstrip("/")
    else:
        SV.check_gpu(setting, args.gpu)
        cmd, env = SV.server_command(setting, engine, args.gpu, port, local_dir=args.local_dir)
        url = f"http://127.0.0.1:{port}"
        server = SV.ServerProcess(cmd, env, url, out / "server.log").__enter__()
    try:
        if server is not None:
            print(f"[bench] starting {setting.name}/{engine} on {url} (log {out / 'server.log'})",
                  file=sys.stderr)
            server.wait_ready(args.server_timeout)
        info = _server_info(url)
        spec = info.get("speculative_algorithm")
        if (engine == "ar") != (spec is None):
            raise RuntimeError(f"the server at {url} runs speculative_algorithm={spec}, which is "
                               f"not engine {engine}")
        for stale in ("requests.jsonl", "summary.json", "summary.txt", "scores.json", "scores.jsonl"):
            (out / stale).unlink(missing_ok=True)  # --overwrite: only now that the server answers
        warm_pool = [j for js in jobs.values() for j in js]
        total = sum(len(js) for js in jobs.values()) * len(opts["concurrency"])
        durations, records = {}, []
        with open(out / "requests.jsonl", "a") as f, \
                tqdm(total=total, desc=f"bench {args.run}", unit="req", file=sys.stderr) as bar:
            for c in opts["concurrency"]:
                n_warm = max(opts["warmup_requests"], c) if opts["warmup_requests"] else 0
                warm = [dict(warm_pool[i % len(warm_pool)], dataset="warmup",
                             sampling_params={"temperature": 0.0, "ignore_eos": True,
                                              "max_new_tokens": min(32, opts["max_new_tokens"])})
                        for i in range(n_warm)]
                bar.set_postfix_str(f"warm-up c={c}")
                wrecs, _ = run_closed_loop(url, warm, c)
                if any(r["error"] for r in wrecs):
                    raise RuntimeError(f"warm-up failed: {next(r['error'] for r in wrecs if r['error'])}")
                for ds, js in jobs.items():
                    bar.set_postfix_str(f"{ds} c={c}")

                    def done(rec, c=c):
                        rec["concurrency"] = c
                        f.write(json.dumps(rec) + "\n")
                        f.flush()
                        bar.update(1)

                    recs, wall = run_closed_loop(url, js, c, on_done=done)
                    for r in recs:
                        r["concurrency"] = c
                    durations[(ds, c)] = wall
                    records += recs
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    rows = summarize(records, durations)
    meta = {"setting": setting.name, "engine": engine, "run": run_name, "gpu_index": args.gpu,
            "gpu": setting.gpu, "gpu_names": SV.gpu_names(), "flags": setting.flags(engine),
            "engine_note": setting.engines[engine]["note"],
            "models": {m.role: {"repo": m.repo, "source": m.source, "revision": m.revision}
                       for m in setting.models()},
            "acceptance": acceptance_record(setting, engine), "options": opts,
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": git_commit(), "command": " ".join(sys.argv), "server_command": cmd,
            "url": url, "host": platform.node(), "server_info": _trim_info(info)}
    (out / "summary.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    text = table(rows)
    (out / "summary.txt").write_text(text + "\n")
    print(f"{setting.name} {args.run} ({meta['acceptance']['mode']} acceptance), {meta['date']}")
    print(text)
    errors = sum(1 for r in records if r.get("error"))
    print(f"[bench] wrote {out}/requests.jsonl ({len(records)} requests, {errors} failed), "
          f"summary.json, summary.txt", file=sys.stderr)
    return 1 if errors else 0


def _server_info(url: str) -> dict:
    import httpx

    return httpx.get(url + "/get_server_info", timeout=30).json()


def _trim_info(info: dict) -> dict:
    keep = ("model_path", "speculative_algorithm", "speculative_draft_model_path",
            "speculative_num_draft_tokens", "dtype", "device", "max_total_num_tokens",
            "max_running_requests", "context_length", "version")
    return {k: info.get(k) for k in keep if k in info}


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Optional[list[str]] = None) -> int:
    import signal

    # SIGTERM / SIGHUP (timeout, a closed terminal) end the run like Ctrl-C: the server started
    # here is stopped, not left holding the port
    old = {sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return _main(argv)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _main(argv: Optional[list[str]]) -> int:
    import httpx

    from specpilot.settings import SettingsError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        parse_run(args.run)
        if args.gpu < 0:
            raise ValueError("gpu must be an index >= 0")
        return run(args)
    except (ValueError, SettingsError) as e:
        parser.print_usage(sys.stderr)
        print(f"bench.sh: error: {e}", file=sys.stderr)
        return 2
    except httpx.HTTPError as e:
        print(f"bench.sh: error: the server did not answer: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except (FileNotFoundError, RuntimeError) as e:
        print(f"bench.sh: error: {e}", file=sys.stderr)
        return 2
