# Sourced by the GPU scripts (gpu_checks.sh, gpu_tests.sh): cds to the repo root, requires $OUT
# (an output folder, created), exports the environment the scripts run Python in and sets PY
# (${PYTHON:-python3}: the GPU machine's interpreter, no venv).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${OUT:?set OUT to an output folder}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PY="${PYTHON:-python3}"
