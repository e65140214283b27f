#!/usr/bin/env bash
# Next GPU call, part 2 (issue 7), prepared in session 26: the W12 GEMV's escape epilogue. The
# M = 1 layer sweep (32 candidates: every plain-loop W12 tiling with its escapes after the loop
# and read before it) with the escape A/B (the winner with esc_pre 0 / 32 / 64 / 128, esc_late,
# and on planes without escapes), then ar end to end bf16 (the bf16 GEMV in graphs) against w12
# (tuned at warm-up over the same candidates) at batch 1 and 4.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs26b; mkdir -p $L; save() { tar czf $OUT/run26c2.tgz -C $L .; }
timeout 295 python3 scripts/gpu_w12_gemv_bench.py --m 1 --max-cands 32 --budget 200 --time-limit 240 \
  --out $L/gemv_m1.json > $L/gemv_m1.log 2>&1; el "gemv sweep rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/gemv_m1.log | grep -E "FAIL|qwen|muse|per token" | tail -16 \
  | cut -c1-200; sed -n '/^escape epilogue/,/^$/p' $L/gemv_m1.log | cut -c1-200; save
timeout 265 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1,4 --out $L/e2e.json > $L/e2e.log 2>&1
el "e2e rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/e2e.log | tail -3 | cut -c1-220; save; el done
