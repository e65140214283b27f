#!/usr/bin/env bash
# next GPU run (issue 5): the concurrency sweep (1, 4, 8, 16, 32) with the overlap scheduler as
# every engine's default (run 20 made it so): plain stock (--disable-overlap-schedule) beside
# spec overlap and the overlapped ar, both targets, 96 new tokens per request; exactness with
# captured graphs on Qwen3.8-27B's run. Logs go back as one tarball (a call returns <= 8 files).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs; mkdir -p $L
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 280 python3 scripts/gpu_graph_check.py --target qwen38-27b --accept 4.8 --draft-graph \
  --batch 1,4,8,16,32 --new 96 --out $L/gc_q38.json > $L/gc_q38.log 2>&1; el "graph check q38 rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/gc_q38.log | grep -E "exactness|FAIL" | grep -v PASS | head
grep -vE "UserWarning|_warn_once|^\s*$" $L/gc_q38.log | tail -9 | cut -c1-260
timeout 250 python3 scripts/gpu_graph_check.py --target muse-glimmer-30b --accept 6.5 --draft-graph \
  --batch 1,4,8,16,32 --new 96 --skip-exactness --out $L/gc_muse.json > $L/gc_muse.log 2>&1
el "graph check muse rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/gc_muse.log | tail -9 | cut -c1-260
tar czf $OUT/run21.tgz -C $L .; ls -la $OUT; el done
