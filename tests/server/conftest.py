"""Helpers for the HTTP tests: a real server (demo model, fp32 CPU) run by uvicorn in a thread.

- `engine` (session): one EngineClient on the demo model; shut down at the end.
- `server` (session): the app on a free port; `server.url`, `server.client`, `server.args`.
- `keyed_server` (session): a second app over the same engine with `--api-key`.
- `wait_idle` (fixture): a function polling `client.stats()` until nothing runs and the KV pool
  is full again; returns the last stats.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time

import pytest

API_KEY = "sk-specpilot-test"  # keyed_server.args.api_key
MAX_TOTAL_TOKENS = 4096


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerThread:
    """uvicorn serving `create_app(client, args)` in a daemon thread on 127.0.0.1:port."""

    def __init__(self, client, args):
        import uvicorn

        from specpilot.server.http import create_app

        self.client, self.args = client, args
        self.app = create_app(client, args)
        config = uvicorn.Config(self.app, host=args.host, port=args.port, log_level="warning",
                                timeout_keep_alive=5)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name=f"uvicorn-{args.port}",
                                       daemon=True)
        self.url = f"http://{args.host}:{args.port}"

    def start(self, timeout: float = 30.0) -> "ServerThread":
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def _wait_idle(client, timeout: float = 5.0) -> dict:
    """Stats once nothing runs or waits and no KV is used; the last stats after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        s = client.stats()
        if s["num_running"] == 0 and s["num_waiting"] == 0 and s["kv_used_tokens"] == 0:
            return s
        if time.monotonic() > deadline:
            return s
        time.sleep(0.05)


@pytest.fixture(scope="session")
def engine_args(demo_model_dir):
    from specpilot.config import ServerArgs

    return ServerArgs(model_path=demo_model_dir, device="cpu", dtype="float32",
                      max_total_tokens=MAX_TOTAL_TOKENS, max_running_requests=32,
                      host="127.0.0.1", port=free_port())


@pytest.fixture(scope="session")
def engine(engine_args):
    from specpilot.server.launch import build_engine_client

    client = build_engine_client(engine_args)
    yield client
    client.shutdown()


@pytest.fixture(scope="session")
def server(engine, engine_args):
    srv = ServerThread(engine, engine_args).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def keyed_server(engine, engine_args):
    args = dataclasses.replace(engine_args, api_key=API_KEY, port=free_port())
    srv = ServerThread(engine, args).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def wait_idle():
    return _wait_idle
