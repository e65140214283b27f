#!/usr/bin/env bash
# Session 28, call 3 (~520 s). (1) ar end to end at batch 1 and 4, bf16 and W12 engines resident
# together and timed in alternation (3 rounds, plain and overlapped scheduler); at batch 4 the W12
# layers run the tensor-core GEMM, now on its own 64-row escape index (W12Planes.tc; call 2 on the
# 16-row index: 0.884x). (2) The linear chain again, now also grouped by shape and with one W12
# config for every layer (is the chain's 2.6% W12 excess the switches between kernels?). (3) The
# layer sweep at M = 4 and 8 (W12 GEMV against the tensor-core GEMM, cuBLAS, the bf16 GEMV); the
# tensor-core GEMM runs call 1's M = 1 winners (tc_from_m1.json: tuning it here would take the
# call's whole time) on its 64-row index (W12-TC) and on the 16-row one (TC-i16).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
D=docs/benchmarks/raw/w12/session28
L=/root/logs28c; mkdir -p $L; save() { tar czf $OUT/s28c.tgz -C $L .; }
flt() { grep -vE "UserWarning|_warn_once|^\s*$" "$@"; }
timeout 40 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_kernel.py \
  -k "own_escape or ring or reproducible_equals or before_the_loop" > $L/tests.log 2>&1
el "tests rc=$?"; tail -1 $L/tests.log | cut -c1-200
timeout 240 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1,4 --rounds 3 \
  --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"; flt $L/e2e.log | grep -E "round|speedup" | cut -c1-230; save
timeout 90 python3 scripts/gpu_linear_chain.py --target qwen38-27b --configs $D/logs/c1/gemv_m1.json \
  --uniform n16k256s1w4p1m1e,n8k256s1w2p1m1e --out $L/chain.json > $L/chain.log 2>&1; el "chain rc=$?"
flt $L/chain.log | grep -E "FAIL|layers" | cut -c1-230; save
timeout 190 python3 scripts/gpu_w12_gemv_bench.py --m 4,8 --max-cands 12 --budget 110 --time-limit 165 \
  --no-esc-ab --tc-tune-file $D/tc_from_m1.json --out $L/gemv_m48.json > $L/gemv_m48.log 2>&1
el "gemv m4,8 rc=$?"; flt $L/gemv_m48.log | grep -E "FAIL|checks|^qwen|^muse|W12-TC:" | tail -30 | cut -c1-200
save; el done
