#!/usr/bin/env bash
# Session 32 call 4: routing without the whole-round rule (K = 64 / 160 now take W12-MMA at
# M = 3-8): the W12 matmul tests; then the layer sweep at M = 2 and 8 over the tuner's candidates.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c4; mkdir -p $L
timeout 130 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_kernel.py \
  -k "w12_matmul_matches_torch" > $L/matmul_tests.log 2>&1
el "matmul tests rc=$?"; grep -E "^(FAILED|E  )|passed|failed" $L/matmul_tests.log | head -8 | cut -c1-250
timeout 270 python3 scripts/gpu_w12_mma_bench.py --skip-check --m 2,8 --configs tuned \
  --time-limit 220 --out $L/mma.json > $L/mma.log 2>&1
el "bench rc=$?"; grep -A6 "per token" $L/mma.log
grep -E "^(qwen|muse)" $L/mma.log | cut -c1-125
el done
