#!/usr/bin/env bash
# Create (if missing) and fill the project's virtualenv.
#
# usage: bash scripts/setup_env.sh [venv-dir]        (default: .venv in the repo root)
#
#   GPU (nvidia-smi works): venv with --system-site-packages so the machine's CUDA torch is
#       used as it is (plain `pip install torch` only if none is importable);
#       then pip install -c requirements/lock-gpu.txt -e .[test,demo,bench,gpu]
#   CPU: pip install torch==2.13.0 (the CPU wheel; an unpinned torch pulls the CUDA build);
#       then pip install -c requirements/lock-cpu.txt -e .[test,demo,bench]
#
# Idempotent: a stamp in the venv records the hash of pyproject.toml, the lock file, this
# script, the mode and the repo path; when it matches, nothing is run.
# Env: PYTHON (interpreter used to create the venv, default python3),
#      SPECPILOT_DEVICE=cpu|gpu (force the mode instead of probing nvidia-smi).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv}"
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac  # relative to the caller's directory
cd "$ROOT"

log() { echo "[setup_env] $*"; }

PY="${PYTHON:-python3}"
if ! command -v "$PY" >/dev/null 2>&1; then
    echo "[setup_env] error: '$PY' not found (set PYTHON=...)" >&2
    exit 1
fi

MODE="${SPECPILOT_DEVICE:-}"
if [ -z "$MODE" ]; then
    if nvidia-smi >/dev/null 2>&1; then MODE=gpu; else MODE=cpu; fi
fi
case "$MODE" in
    cpu) EXTRAS="test,demo,bench" ;;
    gpu) EXTRAS="test,demo,bench,gpu" ;;
    *) echo "[setup_env] error: SPECPILOT_DEVICE must be cpu or gpu, got '$MODE'" >&2; exit 1 ;;
esac
LOCK="requirements/lock-$MODE.txt"
CPU_TORCH="torch==2.13.0"

HASH="$("$PY" - "$MODE" "$ROOT" pyproject.toml "$LOCK" scripts/setup_env.sh <<'EOF'
import hashlib, sys
h = hashlib.sha256()
for arg in sys.argv[1:3]:
    h.update(arg.encode() + b"\0")
for path in sys.argv[3:]:
    with open(path, "rb") as f:
        h.update(f.read() + b"\0")
print(h.hexdigest())
EOF
)"
STAMP="$VENV/.specpilot-setup-stamp"
VPY="$VENV/bin/python"

if [ -x "$VPY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$HASH" ]; then
    log "$VENV is up to date ($MODE; stamp matches pyproject.toml + $LOCK)"
    exit 0
fi

log "mode: $MODE, venv: $VENV, lock: $LOCK"
if [ ! -x "$VPY" ]; then
    VENV_ARGS=()
    [ "$MODE" = gpu ] && VENV_ARGS+=(--system-site-packages)
    log "creating venv with $("$PY" --version 2>&1) ${VENV_ARGS[*]:-}"
    "$PY" -m venv ${VENV_ARGS[@]+"${VENV_ARGS[@]}"} "$VENV"
fi
"$VPY" - <<'EOF'
import sys
if sys.version_info < (3, 10):
    sys.exit(f"[setup_env] error: Python >= 3.10 needed, the venv has {sys.version.split()[0]}")
EOF
rm -f "$STAMP"
PIP=("$VPY" -m pip --no-input --disable-pip-version-check)

if [ "$MODE" = cpu ]; then
    if "$VPY" -c "import importlib.metadata as m, sys; sys.exit(m.version('torch').split('+')[0] != '2.13.0')" 2>/dev/null; then
        log "torch 2.13.0 already installed"
    else
        log "pip install $CPU_TORCH (CPU wheel)"
        "${PIP[@]}" install "$CPU_TORCH"
    fi
else
    if "$VPY" -c "import torch" 2>/dev/null; then
        log "using the installed torch $("$VPY" -c 'import torch; print(torch.__version__)')"
    else
        log "pip install torch"
        "${PIP[@]}" install torch
    fi
fi

log "pip install -c $LOCK -e .[$EXTRAS]"
"${PIP[@]}" install -c "$LOCK" -e ".[$EXTRAS]"

echo "$HASH" > "$STAMP"
log "done: $VENV ($("$VPY" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")'))"
