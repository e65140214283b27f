#!/usr/bin/env bash
# Session 35, call 3: the template GEMM (W12 and bf16, autotuned) against cuBLAS at M = 32.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
L=$OUT/c3; mkdir -p $L
timeout 290 python3 scripts/gpu_w12_bench.py --quick --m 32 --tune-budget 110 \
  --out $L/m32.json > $L/m32.log 2>&1
echo "bench rc=$?"; grep -v "^PASS" $L/m32.log | tail -25 | cut -c1-200
