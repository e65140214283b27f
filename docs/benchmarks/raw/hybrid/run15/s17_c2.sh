#!/usr/bin/env bash
# session 17 call 2: GGUF part b; cost model passes 5 and 6 on Muse-Glimmer-30B batch 1
set -u; mkdir -p /root/parts && cp .gpu2/p.ab /root/parts/
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
timeout ${TO:-300} python3 -m specpilot.costmodel --target muse-glimmer-30b --drafter muse-glimmer-30b-dflash2 --batch 1 --context 256 --block 16 --accept 6.5 --measure --json $OUT/cost_muse.json > $OUT/cost_muse.log 2>&1; el "cost rc=$?"; tail -150 $OUT/cost_muse.log | cut -c1-250
