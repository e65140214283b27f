#!/usr/bin/env bash
# Session 45's device calls. Modes:
#   bash docs/benchmarks/raw/w12/session45/next.sh auto   # ~9 min: ws.py's GPU tests (the graph +
#       PDL chain decides ws.WS_PDL), then on an H200 W12 `stock` against bf16 on Qwen3.8-27B at
#       one request (decides W12 in final of settings/h200_c1_qwen38-27b_dflash2); on any other
#       card the same for Muse-Glimmer-30B (16 verify rows, where ws runs in the engine)
#   bash docs/benchmarks/raw/w12/session45/next.sh e2e    # ~10 min: ws.py's GPU tests, then W12
#       `stock` against bf16 at one request on Muse-Glimmer-30B and Qwen3.8-27B (260 s each)
#   bash docs/benchmarks/raw/w12/session45/next.sh qwen|muse   # ~6 min: that comparison alone
#   bash docs/benchmarks/raw/w12/session45/next.sh wsf    # ~5 min: ws.py's GPU tests, the bench
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$CARD"
tests() {
  OUT=$L WORKERS=8 PER_TEST=120 LIMIT=150 bash scripts/gpu_tests.sh tests/unit/test_w12_ws.py
  el "GPU tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log | cut -c1-250 \
    | head -20
}
stock() {   # target accept batch timeout
  timeout $4 python3 scripts/gpu_w12_e2e.py --target $1 --stock --accept $2 --batch $3 \
    --rounds 2 --one-engine --out $L/stock_$1.json > $L/stock_$1.log 2>&1
  el "stock $1 rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_$1.log | cut -c1-300
}
case "${1:-}" in
auto)
  tests
  case "$CARD" in *H200*) stock qwen38-27b 4.8 1 380 ;; *) stock muse-glimmer-30b 6.5 1 380 ;; esac ;;
e2e)
  tests
  stock muse-glimmer-30b 6.5 1 260
  stock qwen38-27b 4.8 1 260 ;;
qwen) stock qwen38-27b 4.8 1,2 560 ;;
muse) stock muse-glimmer-30b 6.5 1 560 ;;
wsf)
  tests
  timeout 260 python3 scripts/gpu_w12_ws_bench.py --m 8,16 --time-limit 220 --out $L/ws.json \
    > $L/ws.log 2>&1
  el "ws bench rc=$?"; grep -vE "^PASS" $L/ws.log | cut -c1-220 | tail -50
  grep -c "^PASS" $L/ws.log ;;
*) echo "usage: $0 auto | e2e | qwen | muse | wsf" >&2; exit 2 ;;
esac
