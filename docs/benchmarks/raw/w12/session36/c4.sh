#!/usr/bin/env bash
# Session 36, call 4: MmaConfig.esc_mma (the escapes as tensor-core MMAs before the main loop).
# 1. its GPU correctness tests (test_w12_mma.py, every GPU test of the file, xdist);
# 2. W12-MMA per layer on both targets at M = 2 and 8: the esc_mma configs against the tuned
#    space's bases with esc_pre 0 / 1, and the best again without escapes (--esc-ab).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c4; mkdir -p $L
OUT=$L WORKERS=12 PER_TEST=150 LIMIT=170 bash scripts/gpu_tests.sh tests/unit/test_w12_mma.py \
  > $L/tests.out 2>&1
el "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" $L/gpu_tests.log | head -12 | cut -c1-300
CFGS=2/1/2/8/168/1/0/1,2/1/2/8/0/1/0/1,2/1/1/4/0/1/0/1,2/1/2/8/168,2/1/2/8/0/1/1,2/1/2/8/168/1/1,2/1/1/4,2/1/2/8
timeout 380 python3 scripts/gpu_w12_mma_bench.py --skip-check --models qwen38-27b,muse-glimmer-30b \
  --configs $CFGS --m 2,8 --esc-ab --time-limit 330 --out $L/bench.json > $L/bench.log 2>&1
el "bench rc=$?"; grep -E "^(qwen|muse)" $L/bench.log | cut -c1-330
