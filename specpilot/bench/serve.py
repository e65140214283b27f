"""Serve one engine of a setting (scripts/serve.sh <setting> <engine> <gpu>), and a server process
handle for the benchmark.

    python -m specpilot.bench.serve <setting> <engine> <gpu> [--port P] [--host H]
                                    [--local-dir DIR] [-- EXTRA_SERVER_FLAGS...]

Contract:
  * the command is `python -m specpilot.launch_server` + the engine's flags from the setting
    (`{target}` / `{drafter}` replaced by local folders, see specpilot.bench.checkpoints) +
    `--port` (default 30000 + gpu) + `--host` (default 127.0.0.1) + EXTRA (last one wins);
  * GPU settings run with CUDA_VISIBLE_DEVICES=<gpu>; the command refuses to start when
    nvidia-smi does not list that GPU, and warns when its name is not the setting's GPU;
    `gpu: cpu` settings run on CPU and use the index only for the port;
  * the process is replaced (exec) by the server, so signals reach it directly.
`ServerProcess` starts the same command as a child, waits until /health and /v1/models answer
(or the child dies: its log tail is in the error), and stops it (SIGINT, then SIGKILL).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence
from urllib.parse import urlsplit

BASE_PORT = 30000


def gpu_names() -> Optional[list[str]]:
    """GPU names from nvidia-smi, in index order; None when nvidia-smi does not work."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [l.strip() for l in out.stdout.splitlines() if l.strip()] if out.returncode == 0 else None


def check_gpu(setting, gpu: int) -> None:
    from specpilot.settings import GPUS

    if setting.gpu == "cpu":
        return
    names = gpu_names()
    if not names:
        raise RuntimeError(f"setting {setting.name} runs on a GPU ({setting.gpu}) but nvidia-smi "
                           "finds none here; on a CPU machine use cpu_demo_smollm2-135m")
    if gpu >= len(names):
        raise RuntimeError(f"GPU index {gpu} does not exist: nvidia-smi lists {len(names)} GPU(s)")
    want = GPUS[setting.gpu]
    if want and want.lower() not in names[gpu].lower():
        print(f"[serve] warning: setting {setting.name} is for {setting.gpu}, GPU {gpu} is "
              f"{names[gpu]}", file=sys.stderr)


def server_command(setting, engine: str, gpu: int, port: Optional[int] = None,
                   host: str = "127.0.0.1", local_dir: Optional[str] = None,
                   extra: Sequence[str] = ()) -> tuple[list[str], dict]:
    """(argv, env) that serve `engine` of `setting` on GPU `gpu`."""
    from specpilot.bench.checkpoints import resolve_paths
    from specpilot.settings import render_flags

    paths = resolve_paths(setting, local_dir=local_dir)
    port = BASE_PORT + gpu if port is None else port
    argv = [sys.executable, "-m", "specpilot.launch_server",
            *render_flags(setting.flags(engine), {k: str(v) for k, v in paths.items()}),
            "--host", host, "--port", str(port), *extra]
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")  # everything is local once resolved
    if setting.gpu != "cpu":
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return argv, env


class ServerProcess:
    """A launch_server child with its output in `log_path`; use as a context manager."""

    def __init__(self, argv: list[str], env: dict, url: str, log_path: Path):
        self.argv, self.env, self.url, self.log_path = argv, env, url, Path(log_path)
        self.proc: Optional[subprocess.Popen] = None

    def __enter__(self) -> "ServerProcess":
        u = urlsplit(self.url)
        try:   # a server left on the port would be benchmarked in place of this one
            socket.create_connection((u.hostname, u.port), timeout=2).close()
        except OSError:
            pass
        else:
            raise RuntimeError(f"something already listens on {self.url}: stop it or pick "
                               f"another --port (or pass --url to benchmark it on purpose)")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def wait_ready(self, timeout: float = 600.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with status {self.proc.returncode} before "
                                   f"it was ready; last lines of {self.log_path}:\n{self.log_tail()}")
            try:
                if (httpx.get(self.url + "/health", timeout=5).status_code == 200
                        and httpx.get(self.url + "/v1/models", timeout=5).status_code == 200):
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not answer on {self.url} within {timeout:.0f}s;"
                                   f" last lines of {self.log_path}:\n{self.log_tail()}")
            time.sleep(0.5)

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.proc.pid, sig)  # the server's own session: it and its children
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def __exit__(self, *exc) -> None:
        self.stop()
        self._log.close()


def main(argv: Optional[list[str]] = None) -> int:
    from specpilot import settings as S

    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    parser = argparse.ArgumentParser(
        prog="serve.sh", description="Serve one engine of a deployment setting.",
        epilog="Server flags after -- are appended (last one wins), e.g. -- --log-level debug")
    parser.add_argument("setting", help="a folder name under settings/ (or a path)")
    parser.add_argument("engine", choices=S.ENGINES)
    parser.add_argument("gpu", type=int, help="GPU index (port 30000 + gpu); 0 for cpu settings")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--local-dir", default=None, help="where download_models.sh put the repos")
    parser.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    args = parser.parse_args(argv)
    if args.gpu < 0:
        parser.error("gpu must be an index >= 0")
    try:
        setting = S.load(args.setting)
        if not args.dry_run:
            check_gpu(setting, args.gpu)
        cmd, env = server_command(setting, args.engine, args.gpu, args.port, args.host,
                                  args.local_dir, extra)
    except (S.SettingsError, FileNotFoundError, RuntimeError) as e:
        print(f"serve.sh: error: {e}", file=sys.stderr)
        return 2
    note = setting.engines[args.engine]["note"]
    print(f"[serve] {setting.name} / {args.engine}" + (f" ({note})" if note else ""), file=sys.stderr)
    print("[serve] " + " ".join(cmd[1:]), file=sys.stderr)
    if args.dry_run:
        print(" ".join(cmd))
        return 0
    sys.stderr.flush()
    os.execvpe(cmd[0], cmd, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
