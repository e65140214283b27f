#!/usr/bin/env bash
# Session 32 call 2: the Gluon W12 kernel's GPU tests again (M = 1 split-K compile fixed, explicit
# configs on partial rounds, the PDL graph test on finite weights), then `ar` end to end at batch
# 4 and 8 (W12-MMA with split-K candidates and PDL).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c2; mkdir -p $L
timeout 140 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_mma.py > $L/mma_tests.log 2>&1
el "mma tests rc=$?"; grep -E "^(FAILED|E  )|passed|failed" $L/mma_tests.log | head -12 | cut -c1-250
timeout 400 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 4,8 --rounds 2 \
  --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
grep -E "speedup|round|mma-" $L/e2e.log | cut -c1-400
el done
