#!/usr/bin/env bash
# Session 30, call 5 (~330 s). (1) The cost model's stock breakdown with PDL off: with PDL on, a
# kernel's profiled span starts at its early launch and includes its wait for the kernel before
# it, so call 2's per-component times overlap (the notes' "leaves inside" exceed the graph's
# GPU time by 1.4-2.1 ms); off, each kernel's time is its own. Same settings as
# raw/w12/session29/next2.sh. (2) ar end to end on the Muse-Glimmer-30B shape, bf16 against W12,
# PDL off and on (the default), both tuned from session 30's GEMV space.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs30c5; mkdir -p $L; save() { tar czf $OUT/s30c5.tgz -C $L .; }
SPECPILOT_PDL=0 timeout 150 python3 -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 \
  --batch 1 --context 256 --block 8 --accept 4.8 --measure --json $L/cost_q38_nopdl.json > $L/cost_q38_nopdl.log 2>&1
el "q38 rc=$?"; grep -E "^measured|^  [0-9]\." $L/cost_q38_nopdl.log | cut -c1-260; save
SPECPILOT_PDL=0 timeout 150 python3 -m specpilot.costmodel --target muse-glimmer-30b --drafter muse-glimmer-30b-dflash2 \
  --batch 1 --context 256 --block 16 --accept 6.5 --measure --json $L/cost_muse_nopdl.json > $L/cost_muse_nopdl.log 2>&1
el "muse rc=$?"; grep -E "^measured|^  [0-9]\." $L/cost_muse_nopdl.log | cut -c1-260; save
timeout 280 python3 scripts/gpu_w12_e2e.py --target muse-glimmer-30b --batch 1 --rounds 3 --pdl 1/2 \
  --out $L/e2e_muse.json > $L/e2e_muse.log 2>&1; el "e2e muse rc=$?"
grep -E "speedup|tuned|Error|error" $L/e2e_muse.log | cut -c1-1500; save; el done
