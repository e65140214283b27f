#!/usr/bin/env bash
# Session 37, call 4: `ar` end to end, W12 against bf16 in one process, at batch 2 and 4 with
# this session's tuning space (call 3 ran batch 8 and 16).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c4; mkdir -p $L
timeout 380 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 4,2 --rounds 2 \
  --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
grep -E "speedup|round|build_s" $L/e2e.log | cut -c1-300
