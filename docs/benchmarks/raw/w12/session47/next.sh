#!/usr/bin/env bash
# Session 47's device calls (what ran, with its tree: calls.md).
#   bash docs/benchmarks/raw/w12/session47/next.sh esc    # ~7 min (tree 361e5a1): GPU tests; the bench
#       at 16 and 8 rows, both models, every ws candidate also with ws_esc 2 (two escape chunks
#       loaded ahead), ws_peel 1 (the last round in one basic block with the escapes' MMAs) and
#       ws_ewarp 1 (an escape warp); the best ws config also without escapes (--ab)
#   bash docs/benchmarks/raw/w12/session47/next.sh e2e    # ~7 min: ws.py's GPU tests; W12 `stock`
#       against bf16 at one request, Muse-Glimmer-30B (16 verify rows), SIMULATED acceptance 6.5
#   bash docs/benchmarks/raw/w12/session47/next.sh final  # ~5 min: the bench (no checks) at 16
#       and 8 rows, both models, the final candidates; ws.py's GPU tests
#   bash docs/benchmarks/raw/w12/session47/next.sh slim   # ~3 min: final's, Qwen3.8-27B at 16 rows
#   qwen | muse | ncu: session 46's modes (docs/benchmarks/raw/w12/session46/next.sh)
set -u
case "${1:-}" in
qwen|muse|ncu|auto) exec bash docs/benchmarks/raw/w12/session46/next.sh "$@" ;;
esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $L/gpu.txt
case "${1:-}" in
esc)   # call 1's mode: ws_esc / ws_peel exist only in its tree (361e5a1)
  python3 -c "import specpilot.w12.ws as W, sys
sys.exit('ws_esc' not in W.WsConfig.__dataclass_fields__)" \
    || { echo "esc: needs tree 361e5a1 (ws_esc / ws_peel were removed since)" >&2; exit 2; }
  OUT=$L WORKERS=8 PER_TEST=120 LIMIT=150 bash scripts/gpu_tests.sh tests/unit/test_w12_ws.py
  el "GPU tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log | cut -c1-250 \
    | head -20
  timeout 400 python3 scripts/gpu_w12_ws_bench.py --m 16,8 --vary ws_esc=2 --vary ws_peel=1 \
    --vary ws_ewarp=1 --ab \
    --time-limit 340 --out $L/ws.json > $L/ws.log 2>&1
  el "ws bench rc=$?"; grep -vE "^PASS" $L/ws.log | cut -c1-200 ;;
e2e)
  OUT=$L WORKERS=8 PER_TEST=100 LIMIT=110 bash scripts/gpu_tests.sh tests/unit/test_w12_ws.py
  el "GPU tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log | cut -c1-250 \
    | head -20
  timeout 400 python3 scripts/gpu_w12_e2e.py --target muse-glimmer-30b --stock --accept 6.5 \
    --batch 1 --rounds 2 --one-engine --out $L/stock_muse.json > $L/stock_muse.log 2>&1
  el "stock muse rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_muse.log | cut -c1-300 ;;
final|slim)
  if [ "$1" = slim ]; then ARGS="--m 16 --models qwen38-27b"; else ARGS="--m 16,8"; fi
  timeout 220 python3 scripts/gpu_w12_ws_bench.py --skip-check $ARGS --time-limit 190 \
    --out $L/ws.json > $L/ws.log 2>&1
  el "ws bench rc=$?"; cut -c1-200 $L/ws.log
  OUT=$L WORKERS=8 PER_TEST=100 LIMIT=110 bash scripts/gpu_tests.sh tests/unit/test_w12_ws.py
  el "GPU tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log | cut -c1-250 \
    | head -20 ;;
*) echo "usage: $0 esc | e2e | final | slim | qwen | muse | ncu | auto" >&2; exit 2 ;;
esac
