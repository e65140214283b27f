#!/usr/bin/env bash
# Install what the tests need and run them.
#
# usage: bash scripts/test.sh [PYTEST_ARGS...]
#   no arguments: the whole suite (pyproject's testpaths = tests)
#   e.g. bash scripts/test.sh tests/unit/test_demo.py      bash scripts/test.sh -k demo -x
# Env: SPECPILOT_VENV (default .venv in the repo root), SPECPILOT_CACHE (model cache root).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SPECPILOT_VENV:-$ROOT/.venv}"
bash "$ROOT/scripts/setup_env.sh" "$VENV"
cd "$ROOT"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"  # tests never reach a model hub

MODEL_DIR="$("$VENV/bin/python" -m specpilot.demo)"
echo "[test] demo model: $MODEL_DIR"

# From the repo root, pytest with no path arguments runs testpaths (tests/); with paths, only
# those, so `test.sh tests/unit/test_demo.py` does not also run the whole suite.
echo "[test] python -m pytest -q $*"
exec "$VENV/bin/python" -m pytest -q "$@"
