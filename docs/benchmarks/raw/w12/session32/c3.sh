#!/usr/bin/env bash
# Session 32 call 3: the GPU tests of test_w12_mma.py that call 2's 140 s limit cut off (the
# partial last rounds, the PDL graph test, the routing test), one at a time.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c3; mkdir -p $L
timeout 420 python3 -m pytest -v -p no:cacheprovider -rfE tests/unit/test_w12_mma.py \
  -k "64-64 or 96-160 or 272-6656 or pdl or takes_the_tuned or tune_file or split_plan or candidates" \
  > $L/mma_tests.log 2>&1
el "mma tests rc=$?"; grep -E "PASSED|FAILED|^E  |passed|failed" $L/mma_tests.log | head -30 | cut -c1-250
el done
