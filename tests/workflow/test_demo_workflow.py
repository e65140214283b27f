"""The whole workflow on the demo setting, on CPU, with few prompts and short outputs:
serve.sh (ar, stock) -> bench.sh (against them, and final with its own server) -> compare.py
speed -> score.py -> validate.py stock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.workflow.conftest import DEMO, REPO, free_port

BENCH_OPTS = ["--limit", "2", "--max-new-tokens", "6", "--concurrency", "1,2", "--warmup", "1"]


def script(name: str, *args: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = (["bash"] if name.endswith(".sh") else [sys.executable]) + [str(REPO / "scripts" / name), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
    print(f"$ {name} {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}")
    return r


class Served:
    """`bash scripts/serve.sh DEMO <engine> 0 --port P` as a child process group."""

    def __init__(self, engine: str, env: dict, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "w")
        self.proc = subprocess.Popen(["bash", str(REPO / "scripts" / "serve.sh"), DEMO, engine, "0",
                                      "--port", str(self.port)], env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO)
        deadline = time.monotonic() + 180
        while True:
            assert self.proc.poll() is None, f"serve.sh exited: {Path(log).read_text()[-2000:]}"
            try:
                if httpx.get(self.url + "/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve.sh did not come up"
            time.sleep(0.3)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.log.close()


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("results")


def served_bench(engine: str, results: Path, env: dict) -> tuple[Path, dict]:
    srv = Served(engine, env, results / f"serve-{engine}.log")
    try:
        info = httpx.get(srv.url + "/get_server_info", timeout=10).json()
        r = script("bench.sh", DEMO, f"{engine}-1", "0", "--url", srv.url, *BENCH_OPTS,
                   "--results", str(results), env=env)
        assert r.returncode == 0
        assert "conc" in r.stdout and "out tok/s" in r.stdout
    finally:
        srv.stop()
    return results / DEMO / f"{engine}-1", info


@pytest.fixture(scope="module")
def ar_run(results, script_env):
    return served_bench("ar", results, script_env)


@pytest.fixture(scope="module")
def stock_run(results, script_env):
    return served_bench("stock", results, script_env)


def records(folder: Path) -> list[dict]:
    return [json.loads(l) for l in (folder / "requests.jsonl").read_text().splitlines()]


def test_serve_and_bench_ar(ar_run):
    folder, info = ar_run
    assert info["speculative_algorithm"] is None and info["device"] == "cpu"
    recs = records(folder)
    assert len(recs) == 5 * 2 * 2  # 5 sets x 2 prompts x 2 concurrency levels
    assert {r["dataset"] for r in recs} == {"gsm8k", "humaneval", "math500", "mbpp", "chat"}
    for r in recs:
        assert r["error"] is None and 1 <= r["completion_tokens"] <= 6
        assert 0 < r["ttft_s"] <= r["latency_s"] and "spec_verify_ct" not in r
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["meta"]["engine"] == "ar" and summary["meta"]["acceptance"]["mode"].startswith("none")
    assert {(row["dataset"], row["concurrency"]) for row in summary["rows"]} >= {("all", 1), ("all", 2)}


def test_serve_and_bench_stock(stock_run, ar_run):
    folder, info = stock_run
    assert info["speculative_algorithm"] == "DFLASH"
    recs = records(folder)
    assert len(recs) == 20 and all(r["error"] is None for r in recs)
    assert all(r["spec_verify_ct"] >= 1 and r["spec_num_proposed_drafts"] > 0 for r in recs)
    rows = json.loads((folder / "summary.json").read_text())["rows"]
    assert all(row["accept_length"] >= 1.0 for row in rows)
    # lossless: the same greedy tokens as ar (fp32 on CPU; kernels of other shapes may only
    # flip exact near-ties, which validate.py reports)
    ar = {(r["dataset"], r["id"], r["concurrency"]): r["output_ids"] for r in records(ar_run[0])}
    same = sum(ar[(r["dataset"], r["id"], r["concurrency"])] == r["output_ids"] for r in recs)
    assert same >= 18


def test_bench_final_starts_its_own_server(results, script_env):
    r = script("bench.sh", DEMO, "final-1", "0", "--port", str(free_port()), "--datasets",
               "chat,gsm8k", "--limit", "1", "--concurrency", "1", "--max-new-tokens", "4",
               "--warmup", "1", "--results", str(results), env=script_env)
    assert r.returncode == 0
    folder = results / DEMO / "final-1"
    meta = json.loads((folder / "summary.json").read_text())["meta"]
    assert (folder / "server.log").stat().st_size > 0 and meta["url"].endswith(meta["server_command"][-1])
    assert meta["engine"] == "final" and "final equals stock" in meta["engine_note"]
    assert "--speculative-draft-model-path" in meta["server_command"]
    r = script("bench.sh", DEMO, "final-1", "0", "--results", str(results), env=script_env)
    assert r.returncode == 2 and "already holds a run" in r.stderr


def test_compare_speed(results, script_env, ar_run, stock_run):
    r = script("compare.py", "speed", DEMO, "--results", str(results), env=script_env)
    assert r.returncode == 0
    assert "speedup over ar-1" in r.stdout and "stock-1" in r.stdout and "[" in r.stdout
    png = results / DEMO / "compare_speed.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = json.loads(png.with_suffix(".json").read_text())["rows"]
    assert {(x["run"], x["dataset"], x["concurrency"]) for x in rows} >= {("stock-1", "all", 1),
                                                                          ("stock-1", "mbpp", 2)}
    assert all(x["ci95"][0] <= x["speedup"] <= x["ci95"][1] for x in rows)
    assert script("compare.py", "speed", "no_such", "--results", str(results), env=script_env).returncode == 2


def test_score(results, script_env, stock_run):
    r = script("score.py", DEMO, "stock-1", "--results", str(results), env=script_env)
    assert r.returncode == 0 and "accuracy" in r.stdout
    scores = json.loads((results / DEMO / "stock-1" / "scores.json").read_text())
    assert set(scores["sets"]) == {"gsm8k", "humaneval", "math500", "mbpp"}
    assert all(s["n"] == 2 for s in scores["sets"].values())
    assert scores["consistency"]["compared"] == 10
    lines = (results / DEMO / "stock-1" / "scores.jsonl").read_text().splitlines()
    assert len(lines) == 8
    assert script("score.py", DEMO, "nope-1", "--results", str(results), env=script_env).returncode == 2


def test_validate_stock_passes(results, script_env):
    r = script("validate.py", DEMO, "stock", "--limit", "1", "--max-new-tokens", "8",
               "--datasets", "gsm8k,chat", "--results", str(results), env=script_env)
    assert r.returncode == 0 and "PASSED" in r.stdout
    rep = json.loads((results / DEMO / "validate-stock" / "report.json").read_text())
    assert rep["passed"] and [d["name"] for d in rep["directions"]] == ["ar->stock", "stock->ar"]
    assert all(d["positions"] == 16 for d in rep["directions"])
    pos = [json.loads(l) for l in (results / DEMO / "validate-stock" / "positions.jsonl").read_text().splitlines()]
    assert len(pos) == 4 and all(len(p["agree"]) == 8 for p in pos)


def test_scripts_reject_bad_arguments(script_env):
    for name, args in (("serve.sh", ["only-one"]), ("serve.sh", [DEMO, "turbo", "0"]),
                       ("serve.sh", [DEMO, "ar", "gpu0"]), ("bench.sh", [DEMO]),
                       ("bench.sh", [DEMO, "ar", "0"]), ("bench.sh", [DEMO, "ar-1", "0", "--concurrency", "0"]),
                       ("validate.py", [DEMO]), ("validate.py", [DEMO, "ar", "--limit", "0"]),
                       ("score.py", []), ("compare.py", ["speed"])):
        r = script(name, *args, env=script_env, timeout=60)
        assert r.returncode == 2 and "usage" in (r.stderr + r.stdout).lower(), (name, args)


def test_serve_command_lines(script_env):
    r = script("serve.sh", DEMO, "stock", "1", "--dry-run", env=script_env, timeout=60)
    assert r.returncode == 0
    assert "--port 30001" in r.stdout and "--device cpu" in r.stdout  # 30000 + gpu index
    assert "--speculative-draft-model-path" in r.stdout and "assets/smollm2-135m-dflash" in r.stdout
    r = script("serve.sh", DEMO, "ar", "0", "--port", "31234", "--dry-run", "--", "--log-level",
               "debug", env=script_env, timeout=60)
    assert r.returncode == 0 and "--port 31234" in r.stdout and r.stdout.rstrip().endswith("--log-level debug")
    assert "speculative" not in r.stdout
    from specpilot.bench.serve import gpu_names

    if not gpu_names():  # a GPU setting on a machine without that GPU: a clear refusal
        r = script("serve.sh", "h100_c1_qwen38-27b_dflash2", "ar", "0", env=script_env, timeout=60)
        assert r.returncode == 2 and "nvidia-smi finds none" in r.stderr
