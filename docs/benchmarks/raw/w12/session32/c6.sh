#!/usr/bin/env bash
# Session 32 call 6: routing with M = 2 on W12-MMA (kernel.MMA_MIN_M): the two routing tests.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
mkdir -p $OUT/c6
timeout 200 python3 -m pytest -v -p no:cacheprovider -rfE tests/unit/test_w12_mma.py tests/unit/test_w12_gemv.py \
  -k "takes_the_tuned" > $OUT/c6/tests.log 2>&1; echo "rc=$?"
grep -E "PASSED|FAILED|^E  |passed|failed" $OUT/c6/tests.log | head -12 | cut -c1-250
