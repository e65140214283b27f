#!/usr/bin/env bash
# Session 33 call 5: `ar` end to end at batch 4, bf16 against W12 (tuner with the esc_pre twins).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c5; mkdir -p $L
timeout 270 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 4 --rounds 2 \
  --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
grep -E "speedup|round|mma-" $L/e2e.log | cut -c1-400
el done
