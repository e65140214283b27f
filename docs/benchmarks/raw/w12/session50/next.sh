#!/usr/bin/env bash
# Session 50's next device call: the 32-row blocks (ws_rows 2) at 16 and 8 rows on an H200.
# Session 50 (an H100) ran them correct (test_w12_ws.py 16 passed) but timed them at 16 rows only
# in its second call: the first call's --vary (ws_rows=2,ws_ewarp=1) made no variant that fits at
# 9-16 rows (three stages of 80 KB), so ws_stages=2 is varied as well here.
#   bash docs/benchmarks/raw/w12/session50/next.sh h200   # ~4 min, meant for an H200
# If the 32-row blocks win per token at 16 rows there: bash
# docs/benchmarks/raw/w12/session49/next.sh rows2-e2e (W12 `stock` with the tuner offering them).
set -u
case "${1:-}" in
h200) ;;
*) echo "usage: $0 h200" >&2; exit 2 ;;
esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
L=$OUT/next; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $L/gpu.txt
timeout 320 python3 scripts/gpu_w12_ws_bench.py --m 16,8 --time-limit 280 \
  --vary ws_rows=2,ws_ewarp=1 --vary ws_rows=2,ws_ewarp=1,ws_stages=2 \
  --out $L/rows2.json > $L/rows2.log 2>&1
echo "ws bench rc=$?"; grep -vE "^PASS" $L/rows2.log | cut -c1-200
