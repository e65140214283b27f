"""The workflow scripts' bookkeeping, without a model server where none is needed: which ar run
compare.py pairs with, what score.py counts, what bench.sh keeps or stops when a run cannot
start or is ended from outside."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specpilot.bench import compare as C
from specpilot.bench.summary import summarize
from specpilot.evals import datasets as D
from tests.workflow.conftest import DEMO, REPO, free_port

OPTS = {"max_new_tokens": 16, "output_len": "natural", "chat_template_kwargs": {}}


def fake_run(root: Path, name: str, date: str, rate: float, **options) -> Path:
    """A finished bench run of the demo setting: 4 gsm8k prompts at concurrency 1, each
    completion_tokens tokens in tokens / rate seconds."""
    engine = name.split("-")[0]
    opts = dict(OPTS, **options)
    recs = [{"dataset": "gsm8k", "id": f"gsm8k/{i}", "concurrency": 1, "prompt_tokens": 10,
             "completion_tokens": opts["max_new_tokens"], "latency_s": opts["max_new_tokens"] / rate,
             "ttft_s": 0.01, "error": None} for i in range(4)]
    rows = summarize(recs, {("gsm8k", 1): sum(r["latency_s"] for r in recs)})
    meta = {"engine": engine, "date": date, "options": opts,
            "acceptance": {"mode": "baseline" if engine == "ar" else "real"}}
    folder = root / DEMO / name
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"meta": meta, "rows": rows}))
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def test_compare_pairs_runs_of_the_same_options(tmp_path, capsys):
    """The default baseline is the newest ar run whose output-shaping options match the runs
    compared (not simply the newest); other ar runs are not compared as if speculative; a run
    whose options differ from a named baseline is left out with a note, and with nothing left
    the command fails before writing anything."""
    fake_run(tmp_path, "ar-1", "2026-12-01T00:00:00Z", rate=10.0)
    fake_run(tmp_path, "ar-2", "2026-12-02T00:00:00Z", rate=40.0, max_new_tokens=4)
    fake_run(tmp_path, "stock-1", "2026-12-03T00:00:00Z", rate=30.0)
    out = tmp_path / "new" / "dir" / "cmp.png"
    assert C.main(["speed", DEMO, "--results", str(tmp_path), "--out", str(out)]) == 0
    got = json.loads(out.with_suffix(".json").read_text())
    assert got["baseline"] == "ar-1" and {r["run"] for r in got["rows"]} == {"stock-1"}
    assert all(r["speedup"] == pytest.approx(3.0) for r in got["rows"])
    capsys.readouterr()
    assert C.main(["speed", DEMO, "--results", str(tmp_path), "--baseline", "ar-2"]) == 2
    err = capsys.readouterr().err
    assert "stock-1 left out" in err and "max_new_tokens: 16 vs 4" in err
    assert "nothing to compare with ar-2" in err
    assert not (tmp_path / DEMO / "compare_speed.json").exists()


def test_score_counts_failed_requests_as_wrong(tmp_path):
    """A request that failed is scored wrong and counted, not dropped from the denominator."""
    from specpilot.evals.score import score_run, table
    item = D.select("gsm8k", 2)
    answer = D.by_id("gsm8k")[item[0]["id"]]["ref"]["answer"].split("####")[-1].strip()
    recs = [{"dataset": "gsm8k", "id": item[0]["id"], "concurrency": 1, "text": f"#### {answer}",
             "error": None},
            {"dataset": "gsm8k", "id": item[1]["id"], "concurrency": 1, "text": "",
             "error": "HTTP 500"}]
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = score_run(tmp_path, jobs=1)
    assert res["sets"]["gsm8k"] == {"n": 2, "correct": 1, "accuracy": 0.5, "failed_requests": 1}
    assert "failed req" in table(res)


def test_bench_server_refuses_a_taken_port(tmp_path):
    """bench.sh starting its own server on a port something already listens on refuses, rather
    than benchmarking whatever answers there."""
    from specpilot.bench.serve import ServerProcess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(RuntimeError, match="already listens"):
            ServerProcess([sys.executable, "-c", "pass"], {}, url, tmp_path / "log").__enter__()
    assert not (tmp_path / "log").exists()


def test_bench_keeps_the_old_run_when_the_new_one_cannot_start(tmp_path, demo_model_dir,
                                                               monkeypatch, capsys):
    """--overwrite replaces a run only once the server answers: an unreachable --url is an error
    (exit 2, no traceback) and the old run's files stay as they were."""
    from specpilot.bench.run import main
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    old = fake_run(tmp_path, "stock-1", "2026-12-01T00:00:00Z", rate=30.0)
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    rc = main([DEMO, "stock-1", "0", "--url", f"http://127.0.0.1:{free_port()}", "--overwrite",
               "--limit", "1", "--results", str(tmp_path)])
    assert rc == 2 and "did not answer" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_bench_stops_its_server_on_sigterm(tmp_path, script_env):
    """SIGTERM to bench.sh (timeout, a job scheduler) stops the server it started, as Ctrl-C
    does: the port is free again, no server left behind."""
    port = free_port()
    proc = subprocess.Popen(["bash", str(REPO / "scripts" / "bench.sh"), DEMO, "ar-1", "0",
                             "--port", str(port), "--limit", "1", "--max-new-tokens", "4",
                             "--results", str(tmp_path)], env=script_env, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not _listening(port):   # the server is up (bench then waits for /health)
            assert proc.poll() is None and time.monotonic() < deadline, "no server came up"
            time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        deadline = time.monotonic() + 60
        while _listening(port):
            assert time.monotonic() < deadline, "the server outlived bench.sh"
            time.sleep(0.3)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)


def test_validate_refuses_an_empty_dataset_list(capsys):
    from specpilot.validate.cli import main
    assert main([DEMO, "stock", "--datasets", ","]) == 2
    assert "--datasets: choose from" in capsys.readouterr().err
