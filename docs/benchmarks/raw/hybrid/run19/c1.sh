#!/usr/bin/env bash
# next GPU run (issue 5): the stock engine with --enable-spec-overlap (exactness with captured
# graphs, then speed beside plain stock and the overlapped ar), and the attention tile's 3 stages
# end to end (ar at 256 and 8192 tokens). Logs go back as one tarball (a call returns <= 8 files).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs; mkdir -p $L
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_triton_attention.py \
  tests/e2e/test_graph_path.py tests/e2e/test_stock_lossless.py > $L/gputests.log 2>&1
el "tests rc=$?"; tail -3 $L/gputests.log | cut -c1-300
timeout 240 python3 scripts/gpu_graph_check.py --target qwen38-27b --accept 4.8 --draft-graph --batch 1,8 \
  --out $L/gc_q38.json > $L/gc_q38.log 2>&1; el "graph check q38 rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/gc_q38.log | grep -E "exactness|FAIL" | grep -v PASS | head
grep -vE "UserWarning|_warn_once|^\s*$" $L/gc_q38.log | tail -6 | cut -c1-260
timeout 200 python3 scripts/gpu_graph_check.py --target muse-glimmer-30b --accept 6.5 --draft-graph --batch 1,8 \
  --skip-exactness --out $L/gc_muse.json > $L/gc_muse.log 2>&1; el "graph check muse rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/gc_muse.log | tail -6 | cut -c1-260
tar czf $OUT/run19.tgz -C $L .; ls -la $OUT; el done
