#!/usr/bin/env bash
# Session 36, call 7: register caps that ptxas meets without spills with esc_mma (sm_90,
# compiled on the CPU: k2r1a2s8 with esc_mma at 136 registers, no stack; esc_pre 1 at 144 / 152
# with 8 bytes) against the tuned space's bases, on both targets' layers at M = 2, 4, 8.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
L=$OUT/c7; mkdir -p $L
CFGS=2/1/2/8/0/1/0/1,2/1/2/8/136/1/0/1,2/1/2/8/128/1/0/1,2/1/2/8/0/1/1,2/1/2/8/152/1/1,2/1/2/8/144/1/1,2/1/2/4/0/1/0/1,2/1/2/4/0/1/1,2/1/2/8/168
timeout 400 python3 scripts/gpu_w12_mma_bench.py --skip-check --models qwen38-27b,muse-glimmer-30b \
  --configs $CFGS --m 2,4,8 --time-limit 360 --out $L/bench.json > $L/bench.log 2>&1
echo "bench rc=$?"; grep -E "^(qwen|muse)" $L/bench.log | cut -c1-330
