#!/usr/bin/env bash
# Session 33 call 4: the escapes after the main loop (MmaConfig.esc_pre 1 / 2: range and entries
# loaded before it) against before it (0), checked against torch on every shape, timed at
# M = 2, 4, 8, 16; then the PDL graph test (a chain with esc_pre configs).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c4; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
C="2/1/2/8/0/1/1,2/1/1/4/0/3/1,2/1/2/8,2/1/2/8/0/1/2,2/1/1/4,2/1/1/4/0/1/1,2/1/1/4/0/1/2"
C="$C,2/1/2/8/168,2/1/2/8/168/1/1,2/1/1/4/0/3,2/1/2/8/0/3/1,2/1/2/8/0/3"
timeout 330 python3 scripts/gpu_w12_mma_bench.py --m 2,4,8,16 --configs $C \
  --time-limit 300 --out $L/mma.json > $L/mma.log 2>&1
el "bench rc=$?"; grep -E "PASS|FAIL|checks|^  " $L/mma.log | cut -c1-200; grep -A12 "per token" $L/mma.log
grep -E "^(qwen|muse)" $L/mma.log | cut -c1-118
timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_mma.py -k "pdl" > $L/mma_tests.log 2>&1
el "pdl test rc=$?"; tail -3 $L/mma_tests.log | cut -c1-300
el done
