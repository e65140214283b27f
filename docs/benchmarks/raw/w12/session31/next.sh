#!/usr/bin/env bash
# Prepared in session 31, not yet run (~560 s; one call). (0) The GPU tests of the Gluon W12 kernel
# with last partial rounds (masked since 8769a2d; until they pass, w12_matmul routes whole-round
# shapes only) and every W12 kernel / GEMV test on the GPU (session 31's call 6 ran out of time at
# 112 of 114 tests after 4 failures at K = 64 / 160, the partial-round bug). (1) ar end to end at batch 4 and 8,
# bf16 and W12 alternated, three rounds (session 31's call 4 had two). (2) The layer sweep again
# at M = 2, 4, 8 with the tuning space's candidates only.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs31n; mkdir -p $L; save() { tar czf $OUT/s31n.tgz -C $L .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_mma.py > $L/mma_tests.log 2>&1
el "mma tests rc=$?"; tail -5 $L/mma_tests.log | cut -c1-300; save
timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_kernel.py \
  tests/unit/test_w12_gemv.py > $L/w12_tests.log 2>&1
el "w12 tests rc=$?"; grep -E "FAILED|ERROR|passed|failed" $L/w12_tests.log | tail -8 | cut -c1-300; save
timeout 330 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 4,8 --rounds 3 \
  --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
grep -E "speedup" $L/e2e.log | cut -c1-300; save
timeout 150 python3 scripts/gpu_w12_mma_bench.py --skip-check --m 2,4,8 --models qwen38-27b \
  --configs 2/1/2/8,2/1/1/8,2/1/1/4,2/1/2/4,4/1/1/8 --out $L/mma.json > $L/mma.log 2>&1
el "bench rc=$?"; grep -A8 "per token" $L/mma.log; save; el done
