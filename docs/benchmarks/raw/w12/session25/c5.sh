#!/usr/bin/env bash
# Session 25, call 5 (issue 5): bf16 models run their one-row linear layers through our tuned
# bf16 GEMV (layers/linear.py). Its GPU test, then ar / stock at batch 1 with it and without
# (gpu_graph_check --unfused bf16_gemv) on Qwen3.8-27B, then Muse-Glimmer-30B while time lasts.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs; mkdir -p $L; save() { tar czf $OUT/s25c5.tgz -C $L .; }
timeout 40 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_gemv_linear.py > $L/gputest.log 2>&1
el "gemv linear test rc=$?"; tail -1 $L/gputest.log; save
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1 --new 96 --skip-exactness"
run() { timeout $1 $G --target $2 --accept $3 ${4:-} --out $L/$5.json > $L/$5.log 2>&1; el "$5 rc=$?"
  grep -vE "UserWarning|_warn_once|^\s*$" $L/$5.log | grep -E "^ +1 |^ar bs1" | cut -c1-230; save; }
run 90 qwen38-27b 4.8 "" q_gemv
run 50 qwen38-27b 4.8 "--unfused bf16_gemv" q_cublas
run 60 muse-glimmer-30b 6.5 "" m_gemv
run 40 muse-glimmer-30b 6.5 "--unfused bf16_gemv" m_cublas
el done
