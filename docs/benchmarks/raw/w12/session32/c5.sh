#!/usr/bin/env bash
# Session 32 call 5: at M = 1 and 2, W12-MMA (the tuner's candidates) against the W12 GEMV at its
# tuned config, side by side (should M = 2 leave the GEMV?).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c5; mkdir -p $L
timeout 280 python3 scripts/gpu_w12_mma_bench.py --skip-check --m 1,2 --configs tuned --gemv-tuned \
  --time-limit 230 --out $L/mma.json > $L/mma.log 2>&1
el "bench rc=$?"; grep -A6 "per token" $L/mma.log
grep -E "^(qwen|muse)" $L/mma.log | cut -c1-125
el done
