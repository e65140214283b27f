#!/usr/bin/env bash
# Download a deployment's target and drafter at exactly their pinned revisions.
#
#   bash scripts/download_models.sh <setting> [--local-dir DIR] [--verify-hashes]
#
# huggingface_hub snapshot downloads (resumable, with progress bars) into the Hugging Face cache,
# or into DIR/<owner>/<name> with --local-dir (pass the same DIR to serve.sh / bench.sh /
# validate.py, or set SPECPILOT_LOCAL_DIR). A repo whose revision is not pinned yet is resolved
# to the hub's current commit, which is written to settings/<setting>/revisions.lock.json with
# the file list (sizes, LFS sha256); later downloads fetch exactly that commit. Afterwards every
# file is checked against that list and every shard against the *.safetensors.index.json.
# HF_HUB_OFFLINE=1: nothing is fetched; the local copy is checked, and a missing one is an error
# that says what to do. The demo setting needs no hub: its checkpoints are made locally.
# Env: SPECPILOT_VENV, SPECPILOT_PYTHON (use this interpreter, skip setup_env.sh), HF_TOKEN,
# HF_HOME / HF_HUB_CACHE (where the Hugging Face cache lives).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() {
    echo "usage: bash scripts/download_models.sh <setting> [--local-dir DIR] [--verify-hashes]" >&2
    echo "       settings: python -m specpilot.settings list" >&2
}
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    ''|-*) usage; echo "download_models.sh: error: the first argument must be a setting name" >&2; exit 2 ;;
esac
source "$ROOT/scripts/lib/python.sh"  # sets PY, cd to the repo root
exec "$PY" -m specpilot.bench.download "$@"
