#!/usr/bin/env bash
# Session 29, call 4 (~160 s): issue 5's step ratio with PDL, the GEMVs now letting the next
# kernel launch after their main loop (pdl.GEMV_TRIGGER 2, call 3's winner for both forms): ar and
# stock at one request, simulated acceptance, Qwen3.8-27B and Muse-Glimmer-30B, PDL off / on.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs29c4; mkdir -p $L; save() { tar czf $OUT/s29c4.tgz -C $L .; }
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1 --new 96 --skip-exactness"
for run in "q_on qwen38-27b 4.8 1" "q_off qwen38-27b 4.8 0" "m_on muse-glimmer-30b 6.5 1" \
           "m_off muse-glimmer-30b 6.5 0"; do
  set -- $run
  SPECPILOT_PDL=$4 timeout 70 $G --target $2 --accept $3 --out $L/$1.json > $L/$1.log 2>&1
  el "$1 rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/$1.log | tail -2 | cut -c1-260; save
done; el done
