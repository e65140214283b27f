#!/usr/bin/env bash
# Session 35, call 2: MmaConfig.stages (the planes through a cp.async ring in shared memory).
# GPU tests of test_w12_mma.py (numerics of the ring configs, bit equality with the bf16 mode),
# then every tuner candidate (W12 and bf16) without and with a ring of 3 and 4 rounds.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c2; mkdir -p $L
OUT=$L LIMIT=200 PER_TEST=190 bash scripts/gpu_tests.sh tests/unit/test_w12_mma.py \
  -k "matches_torch or bit_for_bit or compiles"
el "tests rc=$?"
timeout 320 python3 scripts/gpu_w12_mma_bench.py --skip-check --configs tuned --bf16 \
  --ring 3,4 --m 2,8,16 --time-limit 250 --out $L/bench.json > $L/bench.log 2>&1
el "bench rc=$?"; grep -A40 "per token" $L/bench.log | cut -c1-200
grep -E "^(qwen|muse)" $L/bench.log | grep -v "M=" | cut -c1-175
