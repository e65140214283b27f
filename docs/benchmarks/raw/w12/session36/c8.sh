#!/usr/bin/env bash
# Session 36, call 8: the tuned space with the 136-register base (was 168): test_w12_mma.py's GPU
# tests (the 136 cap with esc_mma among them), then per token against cuBLAS and bf16-MMA.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c8; mkdir -p $L
OUT=$L WORKERS=12 PER_TEST=150 LIMIT=170 bash scripts/gpu_tests.sh tests/unit/test_w12_mma.py \
  > $L/tests.out 2>&1
el "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" $L/gpu_tests.log | head -12 | cut -c1-300
timeout 300 python3 scripts/gpu_w12_mma_bench.py --skip-check --models qwen38-27b,muse-glimmer-30b \
  --configs tuned --bf16 --m 2,4,8,16 --time-limit 270 --out $L/bench.json > $L/bench.log 2>&1
el "bench rc=$?"; grep -E "M=|time limit" $L/bench.log
