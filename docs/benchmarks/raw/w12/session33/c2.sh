#!/usr/bin/env bash
# Session 33 call 2 (call 1 with R kept a runtime value): stream-K (MmaConfig.persist) against the unsplit kernel on every layer
# shape at M = 1, 4, 8, 16 (with the correctness check on every config), then the GPU tests.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c2; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
C="2/1/2/8/0/1/4,2/1/1/4/0/1/8,2/1/2/8/0/1/3,2/1/2/8/0/1/2,2/1/2/8/168/1/6,2/1/1/4/0/1/6"
C="$C,2/1/1/4/0/1/4,2/1/2/8,2/1/1/4,2/1/2/8/168"
timeout 330 python3 scripts/gpu_w12_mma_bench.py --m 1,4,8,16 --configs $C \
  --time-limit 290 --out $L/mma.json > $L/mma.log 2>&1
el "bench rc=$?"; grep -E "PASS|FAIL|checks" $L/mma.log | cut -c1-200; grep -A12 "per token" $L/mma.log
grep -E "^(qwen|muse)" $L/mma.log | cut -c1-118
timeout 240 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_mma.py -k "gpu" > $L/mma_tests.log 2>&1
el "mma tests rc=$?"; tail -6 $L/mma_tests.log | cut -c1-300
el done
