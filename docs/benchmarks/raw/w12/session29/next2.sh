#!/usr/bin/env bash
# Prepared at the end of session 29 (not run; ~200 s): issue 5's step ratio moved away from 1.2
# with PDL on (ar gained 0.32-0.56 ms, stock 0.13-0.19). The cost model's stock breakdown is from
# run 23 (before the bf16 GEMV, the fused drafter GEMMs and PDL): rerun it on the default now, so
# the next work on the stock step starts from its largest gaps. Qwen3.8-27B + DFlash2 (block 8,
# simulated tau 4.8) and Muse-Glimmer-30B (block 16, 6.5), one request, 256 tokens of context.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs30b; mkdir -p $L; save() { tar czf $OUT/s30b.tgz -C $L .; }
timeout 240 python3 -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 --batch 1 \
  --context 256 --block 8 --accept 4.8 --measure --json $L/cost_q38.json > $L/cost_q38.log 2>&1
el "q38 rc=$?"; grep -E "^measured|^  [0-9]\." $L/cost_q38.log | cut -c1-260; save
timeout 240 python3 -m specpilot.costmodel --target muse-glimmer-30b --drafter muse-glimmer-30b-dflash2 \
  --batch 1 --context 256 --block 16 --accept 6.5 --measure --json $L/cost_muse.json > $L/cost_muse.log 2>&1
el "muse rc=$?"; grep -E "^measured|^  [0-9]\." $L/cost_muse.log | cut -c1-260; save; el done
