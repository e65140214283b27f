#!/usr/bin/env bash
# Session 36, call 5: MmaConfig.esc_mma after the fix of its B operand (call 4: every lane
# gathered activation row 0; the GPU tests caught it at M >= 2).
# 1. test_w12_mma.py's GPU tests (xdist); 2. the tuned space (now base / esc_pre 1 / esc_mma 1
# per candidate) on both targets' layers at M = 2, 4, 8, 16, with the no-escape A/B.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c5; mkdir -p $L
OUT=$L WORKERS=12 PER_TEST=150 LIMIT=170 bash scripts/gpu_tests.sh tests/unit/test_w12_mma.py \
  > $L/tests.out 2>&1
el "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" $L/gpu_tests.log | head -12 | cut -c1-300
timeout 360 python3 scripts/gpu_w12_mma_bench.py --skip-check --models qwen38-27b,muse-glimmer-30b \
  --configs tuned --m 2,4,8,16 --esc-ab --time-limit 320 --out $L/bench.json > $L/bench.log 2>&1
el "bench rc=$?"; grep -E "^(qwen|muse)" $L/bench.log | cut -c1-200
