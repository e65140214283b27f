#!/usr/bin/env bash
# Session 25, call 3 (issue 7): PDL measured no gain and was removed (calls 1-2). The register
# look-ahead of the GEMV (GemvConfig.ahead): the dispatch test, the M = 1 layer sweep with the
# look-ahead tilings among the 24 candidates, then ar end to end bf16 vs w12 (tuned at warm-up).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs; mkdir -p $L; save() { tar czf $OUT/s25c3.tgz -C $L .; }
timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_gemv.py \
  -k "gpu_w12_matmul_takes" > $L/gputests.log 2>&1; el "dispatch test rc=$?"; tail -1 $L/gputests.log
timeout 280 python3 scripts/gpu_w12_gemv_bench.py --m 1 --max-cands 24 --budget 200 --time-limit 230 \
  --out $L/gemv_m1.json > $L/gemv_m1.log 2>&1; el "gemv sweep rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/gemv_m1.log | grep -E "FAIL|qwen|muse|per token" | tail -16 | cut -c1-200; save
timeout 150 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 --out $L/e2e.json > $L/e2e.log 2>&1
el "e2e rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/e2e.log | tail -2 | cut -c1-220; save; el done
