#!/usr/bin/env bash
# Prepared in session 28 (not run yet), ~330 s: the L2 prefetch on the stock step (issue 5's
# ratio), Qwen3.8-27B and Muse-Glimmer-30B at one request, without and with the prefetch (the env
# setting is read by every model runner of the process; the bf16 models' linear layers are
# GemvLinear, whose hook also runs after the verify's cuBLAS GEMMs). Pick the setting that won in
# next.sh.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs29b; mkdir -p $L; save() { tar czf $OUT/s29b.tgz -C $L .; }
SETTING=${SETTING:-head:16}
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1 --new 96 --skip-exactness"
for run in "q_off qwen38-27b 4.8 off" "q_on qwen38-27b 4.8 $SETTING" "m_off muse-glimmer-30b 6.5 off" \
           "m_on muse-glimmer-30b 6.5 $SETTING"; do
  set -- $run
  SPECPILOT_L2_PREFETCH=$4 timeout 80 $G --target $2 --accept $3 --out $L/$1.json > $L/$1.log 2>&1
  el "$1 rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/$1.log | tail -2 | cut -c1-260; save
done; el done
