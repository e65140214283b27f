#!/usr/bin/env bash
# session 17 call 1: GGUF part a; cost model passes 5 and 6 on the GPU (test + Qwen3.8-27B batch 1)
set -u; mkdir -p /root/parts && cp .gpu1/p.aa /root/parts/
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/unit/test_costmodel.py -k "kernel_pass" > $OUT/kt.log 2>&1; el "test rc=$?"; tail -25 $OUT/kt.log | cut -c1-250
timeout 300 python3 -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 --batch 1 --context 256 --block 8 --accept 4.8 --measure --json $OUT/cost_q38.json > $OUT/cost_q38.log 2>&1; el "cost rc=$?"; tail -150 $OUT/cost_q38.log | cut -c1-250
timeout 60 python3 docs/benchmarks/raw/demo-drafter/session16/noise_bench.py cuda > $OUT/noise_cuda.log 2>&1; el "noise rc=$?"; grep -v USDT $OUT/noise_cuda.log | tail -6
