#!/usr/bin/env bash
# Prepared in session 27 (not run yet), ~400 s: the 16-row escape index at M = 2, 4, 8 (W12 GEMV
# against the tensor-core GEMM, cuBLAS and the bf16 GEMV), then ar end to end at batch 4.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs28b; mkdir -p $L; save() { tar czf $OUT/s28b.tgz -C $L .; }
timeout 220 python3 scripts/gpu_w12_gemv_bench.py --m 2,4,8 --max-cands 16 --budget 160 \
  --time-limit 200 --no-esc-ab --out $L/gemv_m248.json > $L/gemv_m248.log 2>&1; el "gemv rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/gemv_m248.log | grep -E "FAIL|checks|per token|^qwen|^muse" \
  | tail -40 | cut -c1-200; save
timeout 150 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 4 --out $L/e2e4.json > $L/e2e4.log 2>&1
el "e2e rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/e2e4.log | tail -2 | cut -c1-220; save; el done
