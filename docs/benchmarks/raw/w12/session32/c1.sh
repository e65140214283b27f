#!/usr/bin/env bash
# Session 32 call 1: the Gluon W12 kernel's GPU tests (partial last rounds, split-K), the
# template-GEMM matmul tests that failed in session 31, then split-K swept on every layer shape.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c1; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_mma.py > $L/mma_tests.log 2>&1
el "mma tests rc=$?"; tail -4 $L/mma_tests.log | cut -c1-300
timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_kernel.py -k "w12_matmul_matches_torch" > $L/matmul_tests.log 2>&1
el "matmul tests rc=$?"; tail -3 $L/matmul_tests.log | cut -c1-300
C=""
for s in 1 2 3 4 6 8; do C="$C,2/1/2/8/0/$s"; done
for s in 1 2 4; do C="$C,2/1/1/4/0/$s"; done
timeout 280 python3 scripts/gpu_w12_mma_bench.py --skip-check --m 4,16 --configs ${C#,} \
  --time-limit 230 --out $L/mma.json > $L/mma.log 2>&1
el "bench rc=$?"; grep -A12 "per token" $L/mma.log
grep -E "^(qwen|muse)" $L/mma.log | cut -c1-125
el done
