#!/usr/bin/env bash
# Next GPU call, part 1 (issues 5 and 7), prepared in sessions 25-26: the GPU tests of the GEMV,
# GemvLinear (the bf16 GEMV only inside graphs, eager keeps F.linear) and the W12 kernels with
# the escape index read before the main loop (esc_pre / esc_late); exactness; ar / stock at batch
# 1 and 8 on both targets with the bf16 GEMV.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs26; mkdir -p $L; save() { tar czf $OUT/run26c1.tgz -C $L .; }
timeout 280 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_gemv_linear.py \
  tests/unit/test_w12_gemv.py tests/unit/test_w12_kernel.py > $L/gputests.log 2>&1; el "tests rc=$?"
tail -1 $L/gputests.log | cut -c1-300; save
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1,8 --new 96"
timeout 170 $G --target qwen38-27b --accept 4.8 --out $L/q.json > $L/q.log 2>&1; el "q rc=$?"
grep -E "^exactness" $L/q.log | grep -c PASS; grep -E "^exactness" $L/q.log | grep -v PASS | head -3
timeout 80 $G --target muse-glimmer-30b --accept 6.5 --skip-exactness --out $L/m.json > $L/m.log 2>&1; el "m rc=$?"
for f in q m; do echo "== $f"; grep -vE "UserWarning|_warn_once|^\s*$" $L/$f.log | tail -4 | cut -c1-260; done; save; el done
