#!/usr/bin/env bash
# Session 37, call 1: two row tiles per warp (MmaConfig.tiles 2: the x loads per weight byte
# halved). test_w12_mma.py's GPU tests (the t2 configs against float64 torch at M = 1-16, with
# escapes as MMAs and as products, split-K, N past the last full 32-row program; bf16_mma at t2;
# t2 W12 equal to bf16_mma bit for bit without escapes), then per token against cuBLAS and
# bf16-MMA with the tuner's space (t2 bases included).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c1; mkdir -p $L
OUT=$L WORKERS=12 PER_TEST=200 LIMIT=230 bash scripts/gpu_tests.sh tests/unit/test_w12_mma.py \
  > $L/tests.out 2>&1
el "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" $L/gpu_tests.log | head -12 | cut -c1-300
timeout 320 python3 scripts/gpu_w12_mma_bench.py --skip-check --models qwen38-27b,muse-glimmer-30b \
  --configs tuned --bf16 --m 2,4,8,16 --time-limit 300 --out $L/bench.json > $L/bench.log 2>&1
el "bench rc=$?"; grep -E "M=|time limit" $L/bench.log
