#!/usr/bin/env bash
# Session 30, call 1 (~450 s). The GEMV tuning space at M <= 2 gains 512-pair-column tilings (twice
# the bytes in flight per program at the same registers per thread: the narrow 5120-row layers
# have only 2-5 programs per SM) and "ahead 2" (the first K-step's weights loaded before the PDL
# wait, that step peeled off the loop: the W12 form's answer to the bf16 look-ahead, which its
# decode registers cannot afford); pipelined and 64-column tilings leave it (never within 1.3x
# at M = 1). (0) GPU tests: the GEMV (new configs bit for bit against the plain loop), PDL in
# every mode, the engines' greedy output with and without PDL on the default (session 29's
# unrun step). (1) ar end to end, bf16 and W12 alternated, both tuned from the new space: PDL
# off, 1/2 (the default), 2/3, 2/2 (session 29's next.sh step 2).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs30c1; mkdir -p $L; save() { tar czf $OUT/s30c1.tgz -C $L .; }
flt() { grep -vE "UserWarning|_warn_once|^\s*$" "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $L/gpu.txt 2>&1
timeout 110 python3 -m pytest -v -p no:cacheprovider -rfE tests/unit/test_pdl.py \
  tests/e2e/test_graph_path.py tests/unit/test_w12_gemv.py -k "pdl or gpu or peeled" > $L/tests.log 2>&1
el "tests rc=$?"; grep -E "FAILED|ERROR|passed|failed" $L/tests.log | tail -8 | cut -c1-200; save
timeout 420 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 --rounds 3 \
  --pdl 1/2,2/3,2/2 --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
flt $L/e2e.log | grep -E "round|speedup|tuned" | cut -c1-1500; save; el done
