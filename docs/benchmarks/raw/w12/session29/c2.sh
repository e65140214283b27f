#!/usr/bin/env bash
# Session 29, call 2 (~330 s): programmatic dependent launch (kernels/pdl.py, $SPECPILOT_PDL) on
# issue 5's step ratio: ar and stock at one request (simulated acceptance), Qwen3.8-27B and
# Muse-Glimmer-30B, each without and with PDL, one process per run.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs29c2; mkdir -p $L; save() { tar czf $OUT/s29c2.tgz -C $L .; }
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1 --new 96 --skip-exactness"
for run in "q_off qwen38-27b 4.8 0" "q_on qwen38-27b 4.8 1" "m_off muse-glimmer-30b 6.5 0" \
           "m_on muse-glimmer-30b 6.5 1"; do
  set -- $run
  SPECPILOT_PDL=$4 timeout 80 $G --target $2 --accept $3 --out $L/$1.json > $L/$1.log 2>&1
  el "$1 rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/$1.log | tail -2 | cut -c1-260; save
done; el done
