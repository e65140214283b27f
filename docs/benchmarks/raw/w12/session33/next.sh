#!/usr/bin/env bash
# Prepared in session 33, not run: the W12 GPU test suites on the final tree (not run whole since
# session 31), then `ar` end to end at one request (the M = 1 GEMV path, unchanged since
# session 30's 1.20x).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
for t in test_w12_mma test_w12_gemv test_w12_kernel; do
  timeout 170 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/$t.py > $L/$t.log 2>&1
  el "$t rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" $L/$t.log | head -8 | cut -c1-250
done
timeout 200 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 --rounds 3 \
  --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
grep -E "speedup|round" $L/e2e.log | cut -c1-300
el done
