#!/usr/bin/env bash
# Session 39, one device call: `stock` (target + DFlash2 drafter, random weights, SIMULATED
# acceptance as in issue 5) with --weight-format w12 against bf16, both resident, rounds
# alternating (gpu_w12_e2e.py --stock). The verify's GEMMs run 8 / 16 / 32 rows at batch
# 1 / 2 / 4 on Qwen3.8-27B (block 8) and 16 / 32 on Muse-Glimmer-30B (block 16); W12 takes the
# Gluon kernels at <= 16 rows and the template GEMM above (the wgmma kernel is not routed).
#   bash docs/benchmarks/raw/w12/session39/stock.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
timeout 330 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock --accept 4.8 \
  --batch 1,2,4 --rounds 2 --out $L/stock_qwen.json > $L/stock_qwen.log 2>&1
el "stock qwen rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_qwen.log | cut -c1-300
timeout 230 python3 scripts/gpu_w12_e2e.py --target muse-glimmer-30b --stock --accept 6.5 \
  --batch 1,2 --rounds 2 --out $L/stock_muse.json > $L/stock_muse.log 2>&1
el "stock muse rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_muse.log | cut -c1-300
