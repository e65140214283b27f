"""Helpers for the workflow tests (settings, download, bench, compare, score, validate).

- `script_env`: environment for running scripts/*.sh in a subprocess with this interpreter
  (SPECPILOT_PYTHON skips setup_env.sh), offline, one torch thread per process (server, client and tests share 2 cores; two OpenMP
  threads per process on a busy 2-core machine make small CPU kernels ~100x slower).
- `free_port()`: an unused TCP port on 127.0.0.1.
- `make_setting(root, name, **changes)`: copy of the demo setting's YAML with top-level keys
  replaced (`a__b=v` sets raw["a"]["b"]; None removes the key), in a fresh folder `root/name`.
"""

from __future__ import annotations

import copy
import os
import socket
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEMO = "cpu_demo_smollm2-135m"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def demo_raw() -> dict:
    return yaml.safe_load((REPO / "settings" / DEMO / "setting.yaml").read_text())


def make_setting(root: Path, name: str, raw: dict | None = None, **changes) -> Path:
    raw = copy.deepcopy(raw or demo_raw())
    raw["name"] = name
    for key, value in changes.items():
        node, parts = raw, key.split("__")
        for p in parts[:-1]:
            node = node[p]
        if value is None:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "setting.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return folder


@pytest.fixture(scope="session")
def script_env(demo_model_dir) -> dict:
    env = dict(os.environ)
    env.update(SPECPILOT_PYTHON=sys.executable, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               PYTHONUNBUFFERED="1")
    env.pop("SPECPILOT_SETTINGS_DIR", None)
    return env
