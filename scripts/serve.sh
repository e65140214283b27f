#!/usr/bin/env bash
# Serve a model with SpecPilot.
#
#   bash scripts/serve.sh [-- SERVER_FLAGS...]
#       The embedded demo model SmolLM2-135M-Instruct on 127.0.0.1:30000 (GPU if there is
#       one, else CPU). Sets up .venv (scripts/setup_env.sh) and the model folder first.
#   bash scripts/serve.sh <setting> <engine> <gpu> [--port P] [--host H] [--local-dir DIR]
#                         [-- SERVER_FLAGS...]
#       Engine ar|stock|final of the deployment settings/<setting>/ on GPU index <gpu>
#       (CUDA_VISIBLE_DEVICES=<gpu>), port 30000 + <gpu> unless --port. Settings whose gpu is
#       `cpu` (cpu_demo_smollm2-135m) run on CPU. Checkpoints come from download_models.sh
#       (--local-dir: the same DIR given there); the demo's are made locally.
#
# SERVER_FLAGS go to `python -m specpilot.launch_server` after the others (last one wins),
# e.g.  bash scripts/serve.sh -- --port 30001 --log-level debug
# Env: SPECPILOT_VENV (default .venv in the repo root), SPECPILOT_PYTHON (use this interpreter
# as it is and skip setup_env.sh), SPECPILOT_CACHE (model cache root), SPECPILOT_LOCAL_DIR.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
    cat <<'EOF'
usage: bash scripts/serve.sh [-- SERVER_FLAGS...]
       bash scripts/serve.sh <setting> <engine> <gpu> [--port P] [--host H] [--local-dir DIR]
                             [-- SERVER_FLAGS...]

  no arguments      serve the embedded demo model SmolLM2-135M-Instruct on 127.0.0.1:30000
  <setting>         a folder under settings/ (python -m specpilot.settings list)
  <engine>          ar | stock | final
  <gpu>             GPU index (0, 1, ...); the port is 30000 + gpu unless --port
  -- SERVER_FLAGS   passed to `python -m specpilot.launch_server` (e.g. -- --log-level debug)
EOF
}

POSITIONAL=()
OPTS=()
EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --) shift; EXTRA=("$@"); break ;;
        -h|--help) usage; exit 0 ;;
        --port|--host|--local-dir)
            [ $# -ge 2 ] || { echo "serve.sh: $1 needs a value" >&2; usage >&2; exit 2; }
            OPTS+=("$1" "$2"); shift 2 ;;
        --dry-run) OPTS+=("$1"); shift ;;
        -*) echo "serve.sh: unknown option '$1' (server flags go after --)" >&2; usage >&2; exit 2 ;;
        *) POSITIONAL+=("$1"); shift ;;
    esac
done

case "${#POSITIONAL[@]}" in
    0)
        if [ "${#OPTS[@]}" -gt 0 ]; then
            echo "serve.sh: ${OPTS[0]} needs <setting> <engine> <gpu> (demo: put server flags after --)" >&2
            usage >&2
            exit 2
        fi ;;
    3)
        ENGINE="${POSITIONAL[1]}"
        case "$ENGINE" in
            ar|stock|final) ;;
            *) echo "serve.sh: engine must be ar, stock or final, got '$ENGINE'" >&2; usage >&2; exit 2 ;;
        esac
        case "${POSITIONAL[2]}" in
            ''|*[!0-9]*) echo "serve.sh: gpu must be a GPU index (0, 1, ...), got '${POSITIONAL[2]}'" >&2; usage >&2; exit 2 ;;
        esac
        ;;
    *)
        echo "serve.sh: expected no arguments or <setting> <engine> <gpu>, got ${#POSITIONAL[@]}: ${POSITIONAL[*]}" >&2
        usage >&2
        exit 2
        ;;
esac

source "$ROOT/scripts/lib/python.sh"  # sets PY, cd to the repo root
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"  # everything is local; never wait on the hub

if [ "${#POSITIONAL[@]}" -eq 3 ]; then
    exec "$PY" -m specpilot.bench.serve "${POSITIONAL[@]}" ${OPTS[@]+"${OPTS[@]}"} \
        -- ${EXTRA[@]+"${EXTRA[@]}"}
fi

MODEL_DIR="$("$PY" -m specpilot.demo)"
echo "[serve] demo model: $MODEL_DIR" >&2
exec "$PY" -m specpilot.launch_server --model-path "$MODEL_DIR" \
    --host 127.0.0.1 --port 30000 ${EXTRA[@]+"${EXTRA[@]}"}
