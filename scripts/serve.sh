#!/usr/bin/env bash
# Serve a model with SpecPilot.
#
#   bash scripts/serve.sh [-- SERVER_FLAGS...]
#       The embedded demo model SmolLM2-135M-Instruct on 127.0.0.1:30000 (GPU if there is
#       one, else CPU). Sets up .venv (scripts/setup_env.sh) and the model folder first.
#   bash scripts/serve.sh <setting> <engine> <gpu> [-- SERVER_FLAGS...]
#       A deployment from settings/<setting>/ with engine ar|stock|final (not implemented yet).
#
# SERVER_FLAGS go to `python -m specpilot.launch_server` after the defaults (last one wins),
# e.g.  bash scripts/serve.sh -- --port 30001 --log-level debug
# Env: SPECPILOT_VENV (default .venv in the repo root), SPECPILOT_CACHE (model cache root).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
    cat <<'EOF'
usage: bash scripts/serve.sh [-- SERVER_FLAGS...]
       bash scripts/serve.sh <setting> <engine> <gpu> [-- SERVER_FLAGS...]

  no arguments      serve the embedded demo model SmolLM2-135M-Instruct on 127.0.0.1:30000
  <setting>         a folder under settings/ (which checkpoints, which engine configs)
  <engine>          ar | stock | final
  <gpu>             the GPU the setting is tuned for (e.g. h200)
  -- SERVER_FLAGS   passed to `python -m specpilot.launch_server` (e.g. -- --port 30001)
EOF
}

POSITIONAL=()
EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --) shift; EXTRA=("$@"); break ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "serve.sh: unknown option '$1' (server flags go after --)" >&2; usage >&2; exit 2 ;;
        *) POSITIONAL+=("$1"); shift ;;
    esac
done

case "${#POSITIONAL[@]}" in
    0) ;;
    3)
        ENGINE="${POSITIONAL[1]}"
        case "$ENGINE" in
            ar|stock|final) ;;
            *) echo "serve.sh: engine must be ar, stock or final, got '$ENGINE'" >&2; usage >&2; exit 2 ;;
        esac
        echo "serve.sh: settings folders are not implemented yet: cannot serve setting" \
             "'${POSITIONAL[0]}' with engine '$ENGINE' on '${POSITIONAL[2]}'." >&2
        echo "serve.sh: run 'bash scripts/serve.sh' (no arguments) to serve the demo model." >&2
        exit 2
        ;;
    *)
        echo "serve.sh: expected no arguments or <setting> <engine> <gpu>, got ${#POSITIONAL[@]}: ${POSITIONAL[*]}" >&2
        usage >&2
        exit 2
        ;;
esac

VENV="${SPECPILOT_VENV:-$ROOT/.venv}"
bash "$ROOT/scripts/setup_env.sh" "$VENV"
cd "$ROOT"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"  # everything is local; never wait on the hub
MODEL_DIR="$("$VENV/bin/python" -m specpilot.demo)"
echo "[serve] demo model: $MODEL_DIR" >&2
exec "$VENV/bin/python" -m specpilot.launch_server --model-path "$MODEL_DIR" \
    --host 127.0.0.1 --port 30000 ${EXTRA[@]+"${EXTRA[@]}"}
