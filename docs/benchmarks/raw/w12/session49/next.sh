#!/usr/bin/env bash
# Session 49's device calls after c1-c7 (calls.md).
#   bash docs/benchmarks/raw/w12/session49/next.sh rows2   # ~4 min, any sm_90 (the point is an
#       H200): ws.py's GPU tests (the 32-row blocks, ws_rows 2, among them: built in session 49,
#       not yet run), then the bench with its checks at 16 and 8 rows with every candidate also
#       as 32-row blocks (--vary ws_rows=2,ws_ewarp=1): "without the --vary variants" is today's
#       kernel, "best of both" with them
#   bash docs/benchmarks/raw/w12/session49/next.sh rows2-e2e   # ~4 min: W12 `stock` against bf16
#       at one request, Muse-Glimmer-30B + DFlash2 (16 verify rows), the tuner offering the
#       32-row blocks ($SPECPILOT_W12_WS_ROWS2=1); then Qwen3.8-27B + DFlash2 at two requests
#   session 48's modes: docs/benchmarks/raw/w12/session48/next.sh
set -u
case "${1:-}" in
rows2|rows2-e2e) ;;
*) echo "usage: $0 rows2 | rows2-e2e" >&2; exit 2 ;;
esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $L/gpu.txt
case "$1" in
rows2)
  OUT=$L WORKERS=8 PER_TEST=150 LIMIT=200 bash scripts/gpu_tests.sh tests/unit/test_w12_ws.py
  el "GPU tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log | cut -c1-250 \
    | head -20
  timeout 300 python3 scripts/gpu_w12_ws_bench.py --m 16,8 --time-limit 250 \
    --vary ws_rows=2,ws_ewarp=1 --out $L/rows2.json > $L/rows2.log 2>&1
  el "ws bench rc=$?"; grep -vE "^PASS" $L/rows2.log | cut -c1-200 ;;
rows2-e2e)
  for a in "muse-glimmer-30b 6.5 1" "qwen38-27b 4.8 2"; do
    set -- $a
    SPECPILOT_W12_WS_ROWS2=1 timeout 240 python3 scripts/gpu_w12_e2e.py --target $1 --stock \
      --drafter dflash2 --accept $2 --batch $3 --rounds 2 --one-engine \
      --out $L/rows2_$1.json > $L/rows2_$1.log 2>&1
    el "stock $1 rc=$?"; grep -E "speedup|Error" $L/rows2_$1.log | cut -c1-300
    grep -o "'mma-w12[^']*': '[^']*r2'" $L/rows2_$1.log | head -20
  done ;;
esac
