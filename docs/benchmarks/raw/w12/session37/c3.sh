#!/usr/bin/env bash
# Session 37, call 3: W12 at 9-16 rows on the Gluon kernel (kernel.MMA_MAX_M 8 -> 16, after
# call 2: 4-16% faster per token than the tuned Triton W12 GEMM there) and k2r1a2s4 as a split
# base. The routing test on the GPU, then `ar` end to end, W12 against bf16 in one process, at
# batch 8 and 16 (16 rows per GEMM: until now the template GEMM's).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c3; mkdir -p $L
OUT=$L WORKERS=2 PER_TEST=120 LIMIT=150 bash scripts/gpu_tests.sh tests/unit/test_w12_mma.py \
  -k "takes_the_tuned" > $L/tests.out 2>&1
el "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" $L/gpu_tests.log | head -5 | cut -c1-300
timeout 440 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 16,8 --rounds 2 \
  --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
grep -E "speedup|round|build_s" $L/e2e.log | cut -c1-300
