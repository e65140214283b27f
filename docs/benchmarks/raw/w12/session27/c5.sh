#!/usr/bin/env bash
# GPU call of session 27 (issue 7): the escape index by 16-row blocks. The M = 1 layer sweep with
# the escape A/B, now with the "idx64" column (the winner on the old 64-row index, same run; the
# sweep checks every shape's output against torch first); ar end to end bf16 against w12 at
# batch 1; then the GPU tests of the escape paths (GEMV and GEMM, both index layouts, split-K
# and not) while time is left.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs27; mkdir -p $L; save() { tar czf $OUT/s27c5.tgz -C $L .; }
timeout 200 python3 scripts/gpu_w12_gemv_bench.py --m 1 --max-cands 32 --budget 170 --time-limit 185 \
  --out $L/gemv_m1.json > $L/gemv_m1.log 2>&1; el "gemv sweep rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/gemv_m1.log | grep -E "FAIL|checks|per token|^qwen|^muse" \
  | tail -16 | cut -c1-200; sed -n '/^escape epilogue/,/^$/p' $L/gemv_m1.log | cut -c1-200; save
timeout 150 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 --out $L/e2e.json > $L/e2e.log 2>&1
el "e2e rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/e2e.log | tail -2 | cut -c1-220; save
timeout 90 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_gemv.py \
  tests/unit/test_w12_kernel.py -k "escape or esc or tune_file" > $L/gputests.log 2>&1
el "tests rc=$?"; tail -3 $L/gputests.log | cut -c1-300; save; el done
