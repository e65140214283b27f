#!/usr/bin/env bash
# Prepared in session 33, not run: bf16_mma (the W12 tensor-core loop on bf16 words, with PDL)
# for the verify's rows of a bf16 target (layers.linear.FUSE_MMA, off by default).
# 1. its GPU tests; 2. per layer at M = 8 / 16 against cuBLAS; 3. `stock` at one request with
# FUSE_MMA on and off in one process (Qwen3.8-27B block 8, Muse-Glimmer-30B block 16).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_mma.py \
  tests/unit/test_gemv_linear.py -k "bf16 or pdl or mma_linear" > $L/tests.log 2>&1
el "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" $L/tests.log | head -8 | cut -c1-250
timeout 200 python3 scripts/gpu_w12_mma_bench.py --skip-check --bf16 --configs 2/1/2/8,2/1/1/4 \
  --m 8,16 --time-limit 170 --out $L/bf16.json > $L/bf16.log 2>&1
el "bench rc=$?"; grep -E "bf16:|x cuBLAS" $L/bf16.log | tail -8
for t in "qwen38-27b 4.8" "muse-glimmer-30b 6.5"; do
  set -- $t
  timeout 200 python3 scripts/gpu_graph_check.py --target $1 --accept $2 --batch 1 --new 96 \
    --draft-graph --skip-exactness --ab bf16_mma --rounds 2 --out $L/ab_$1.json > $L/ab_$1.log 2>&1
  el "ab $1 rc=$?"; grep -E "^ab |ar " $L/ab_$1.log | cut -c1-250
done
el done
