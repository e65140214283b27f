#!/usr/bin/env bash
# next GPU run (issue 5): --enable-spec-overlap with the length rule (no step queued behind one
# that may end every request for length), timed with 96 new tokens per request beside plain
# stock and the overlapped ar, on both targets; exactness with captured graphs on Qwen3.8-27B's
# run (now with a DFlash2 drafter too: the greedy selector walk in one Triton launch); the cost
# model with its new overlapped pass. Logs go back as one tarball (a call returns <= 8 files).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs; mkdir -p $L
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_selector_kernel.py tests/unit/test_heads.py \
  > $L/gputests.log 2>&1; el "selector tests rc=$?"; tail -2 $L/gputests.log | cut -c1-300
timeout 240 python3 scripts/gpu_graph_check.py --target qwen38-27b --accept 4.8 --draft-graph --batch 1,8 \
  --new 96 --out $L/gc_q38.json > $L/gc_q38.log 2>&1; el "graph check q38 rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/gc_q38.log | grep -E "exactness|FAIL" | grep -v PASS | head
grep -vE "UserWarning|_warn_once|^\s*$" $L/gc_q38.log | tail -6 | cut -c1-260
timeout 200 python3 scripts/gpu_graph_check.py --target muse-glimmer-30b --accept 6.5 --draft-graph --batch 1,8 \
  --new 96 --skip-exactness --out $L/gc_muse.json > $L/gc_muse.log 2>&1; el "graph check muse rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/gc_muse.log | tail -6 | cut -c1-260
timeout 200 python3 -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 --batch 1 --context 256 \
  --block 8 --accept 4.8 --measure --json $L/cost_q38.json > $L/cost_q38.log 2>&1; el "costmodel rc=$?"
grep -E "^measured|^  [0-9]\." $L/cost_q38.log | cut -c1-260
tar czf $OUT/run20.tgz -C $L .; ls -la $OUT; el done
