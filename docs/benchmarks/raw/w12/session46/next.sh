#!/usr/bin/env bash
# Session 46's device calls (what ran, with its tree: calls.md). Modes for the next session:
#   bash docs/benchmarks/raw/w12/session46/next.sh auto   # on an H200 `qwen`; else `ncu`
#   bash docs/benchmarks/raw/w12/session46/next.sh qwen|muse   # ~9 min: W12 `stock` against bf16
#       at one request (Qwen3.8-27B also at two), SIMULATED acceptance
#   bash docs/benchmarks/raw/w12/session46/next.sh ncu    # ~5 min: Nsight Compute (full set, SASS
#       source page) on ws at 16 rows with and without escapes, and at 8: Qwen3.8-27B's gate_up
#       and down
#   bash docs/benchmarks/raw/w12/session46/next.sh wsf    # ~5 min: ws.py's GPU tests, the bench
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
  case "$CARD" in *H200*) exec bash $0 qwen ;; *) exec bash $0 ncu ;; esac ;;
ncu)
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  SUM=docs/benchmarks/raw/w12/session35/ncu_source_summary.py
  for sh in 34816,5120 5120,17408; do
    timeout 200 $NCU --profile-from-start off --clock-control none --set full --import-source no \
      -o $L/ncu_$sh python3 scripts/gpu_w12_ncu.py --shape $sh \
      --cases ws:16:4,wsbare:16:4,ws:16:3,ws:8:3 > $L/ncu_$sh.log 2>&1
    el "ncu $sh rc=$?"; tail -4 $L/ncu_$sh.log
    $NCU -i $L/ncu_$sh.ncu-rep --page details > $L/details_$sh.txt 2>&1
    $NCU -i $L/ncu_$sh.ncu-rep --page source --csv --print-source sass > $L/source_$sh.csv 2>&1
    grep -E "^  [a-z_]|Duration|Throughput|Warp Cycles Per Issued|Issued Warp Per|No Eligible|L2 Hit|Mem Busy|Max Bandwidth" \
      $L/details_$sh.txt | cut -c1-150 | head -90
    for k in 0 1 2 3; do python3 $SUM $L/source_$sh.csv $k 14 2>&1 | cut -c1-200; done \
      | tee $L/summary_$sh.txt
  done
  rm -f $L/source_*.csv ;;
qwen) stock qwen38-27b 4.8 1,2 560 ;;
muse) stock muse-glimmer-30b 6.5 1 560 ;;
wsf)
  tests
  timeout 260 python3 scripts/gpu_w12_ws_bench.py --m 8,16 --time-limit 220 --out $L/ws.json \
    > $L/ws.log 2>&1
  el "ws bench rc=$?"; grep -vE "^PASS" $L/ws.log | cut -c1-220 | tail -50
  grep -c "^PASS" $L/ws.log ;;
*) echo "usage: $0 auto | ncu | qwen | muse | wsf" >&2; exit 2 ;;
esac
