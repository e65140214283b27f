#!/usr/bin/env bash
# Last GPU call of session 24 (issues 7 and 5): the GEMV dispatch test, the rope kernel's k-only
# case and the head top-k kernel on CUDA; `ar` end to end on the Qwen3.8-27B shape, bf16 against
# --weight-format w12 at one request (M = 1 now runs the tuned CUDA-core GEMV); then the stock /
# ar step ratio on both targets with this session's drafter changes (Qwen with the exactness
# cases). The tarball is rewritten after every step, so a call cut short returns what finished.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logsc2; mkdir -p $L
save() { tar czf $OUT/s24c2.tgz -C $L .; }
timeout 50 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_gemv.py -k "matmul_takes or gpu_gemv" \
  > $L/gputests.log 2>&1; el "gemv tests rc=$?"; tail -1 $L/gputests.log | cut -c1-300
timeout 50 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_rope_kernel.py tests/unit/test_topk_kernel.py \
  tests/unit/test_selector_kernel.py >> $L/gputests.log 2>&1; el "rope/topk tests rc=$?"; tail -1 $L/gputests.log | cut -c1-300; save
timeout 230 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 --out $L/e2e_q38.json \
  > $L/e2e_q38.log 2>&1; el "w12 e2e rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/e2e_q38.log | tail -8 | cut -c1-220; save
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1,8 --new 96"
timeout 120 $G --target qwen38-27b --accept 4.8 --out $L/q.json > $L/q.log 2>&1; el "q rc=$?"
grep -E "^exactness" $L/q.log | grep -c PASS; grep -E "^exactness" $L/q.log | grep -v PASS | head -3
grep -vE "UserWarning|_warn_once|^\s*$" $L/q.log | tail -4 | cut -c1-260; save
timeout 60 $G --target muse-glimmer-30b --accept 6.5 --skip-exactness --out $L/m.json > $L/m.log 2>&1; el "m rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/m.log | tail -4 | cut -c1-260; save; el done
