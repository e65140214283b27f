#!/usr/bin/env bash
# Benchmark one engine of a deployment setting; results in results/<setting>/<engine>-<run>/.
#
#   bash scripts/bench.sh <setting> <engine>-<run> <gpu> [options]
#
# Starts the engine like `serve.sh <setting> <engine> <gpu>` (port 30000 + gpu), warms it up at
# each concurrency level (not recorded), then sends the setting's benchmark prompts (gsm8k,
# humaneval, math500, mbpp, chat) greedily at each level; writes requests.jsonl (per request:
# tokens, latency, TTFT, TPOT, acceptance, text), summary.json and summary.txt.
# Options (defaults from the setting's `bench:` block):
#   --limit N  --max-new-tokens M  --concurrency 1,2,4  --datasets gsm8k,chat
#   --output-len natural|fixed  --warmup N  --url URL (a running server)  --port P
#   --local-dir DIR  --results DIR  --overwrite
# Example (runs anywhere): bash scripts/bench.sh cpu_demo_smollm2-135m ar-1 0 --limit 2
# Env: SPECPILOT_VENV, SPECPILOT_PYTHON (use this interpreter, skip setup_env.sh), SPECPILOT_CACHE.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ $# -lt 3 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] && RC=0 || RC=2
    echo "usage: bash scripts/bench.sh <setting> <engine>-<run> <gpu> [--limit N] [--max-new-tokens M]" >&2
    echo "       [--concurrency 1,2,4] [--datasets a,b] [--output-len natural|fixed] [--warmup N]" >&2
    echo "       [--url URL] [--port P] [--local-dir DIR] [--results DIR] [--overwrite]" >&2
    [ "$RC" -ne 0 ] && echo "bench.sh: error: expected <setting> <engine>-<run> <gpu>, got $# argument(s)" >&2
    exit "$RC"
fi
source "$ROOT/scripts/lib/python.sh"  # sets PY, cd to the repo root
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"  # checkpoints are local (download_models.sh)
exec "$PY" -m specpilot.bench "$@"
