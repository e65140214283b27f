#!/usr/bin/env bash
# Prepared in session 27 for the next GPU call (issue 7; not run yet), ~540 s. (0) The GPU tests
# of the escape paths (session 27's last change, kernel._esc_table, never ran on CUDA). (1) The M = 1
# layer sweep with the escape A/B, now also on an index of 8-row blocks (idx8: exact for the
# 8-row tilings that won 4 of 11 shapes in session 27). (2) One token's linear layers in model
# order, every layer its own weights, as one graph, against the same configs timed in isolation
# (scripts/gpu_linear_chain.py: is the 2-7% in-graph excess the footprint or the kernels in
# between?). (3) ar end to end bf16 against w12 at batch 1. Then next2.sh.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs28; mkdir -p $L; save() { tar czf $OUT/s28a.tgz -C $L .; }
show() { grep -vE "UserWarning|_warn_once|^\s*$" $1 | grep -E "FAIL|checks|per token|^qwen|^muse" \
  | tail -${2:-16} | cut -c1-200; sed -n '/^escape epilogue/,/^$/p' $1 | cut -c1-220; }
timeout 60 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_gemv.py \
  tests/unit/test_w12_kernel.py -k "escape or esc" > $L/gputests.log 2>&1   # _esc_table on CUDA
el "tests rc=$?"; tail -1 $L/gputests.log | cut -c1-200; save
timeout 190 python3 scripts/gpu_w12_gemv_bench.py --m 1 --max-cands 32 --budget 160 --time-limit 175 \
  --out $L/gemv_m1.json > $L/gemv_m1.log 2>&1; el "gemv m1 rc=$?"; show $L/gemv_m1.log; save
timeout 180 python3 scripts/gpu_linear_chain.py --target qwen38-27b --configs $L/gemv_m1.json \
  --out $L/chain.json > $L/chain.log 2>&1; el "chain rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/chain.log | tail -8 | cut -c1-200; save
timeout 110 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 --out $L/e2e.json > $L/e2e.log 2>&1
el "e2e rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/e2e.log | tail -2 | cut -c1-220; save; el done
