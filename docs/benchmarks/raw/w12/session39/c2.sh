#!/usr/bin/env bash
# Session 39, call 2: the wgmma kernel's GPU tests after the overlap variant's removal (in the
# background), and where W12 `stock` fails (debug.py).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c2; mkdir -p $L
(OUT=$L WORKERS=6 PER_TEST=200 LIMIT=170 bash scripts/gpu_tests.sh tests/unit/test_w12_wgmma.py \
  > $L/tests_rc.txt 2>&1) &
CUDA_LAUNCH_BLOCKING=1 timeout 210 python3 docs/benchmarks/raw/w12/session39/debug.py qwen38-27b \
  specpilot/model_configs 4.8 > $L/debug.log 2>&1
el "debug rc=$?"; grep -E "ok|FAIL|W12 calls|Error|error" $L/debug.log | cut -c1-1500
wait; el "tests done"; cat $L/tests_rc.txt | cut -c1-250
