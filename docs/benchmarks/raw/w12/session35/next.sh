#!/usr/bin/env bash
# Prepared in session 35, not run. One device call (about 4 minutes):
#   bash docs/benchmarks/raw/w12/session35/next.sh
# 1. The W12-MMA kernel's plane loads alone (gpu_w12_pattern_probe.py --gluon: the kernel's
#    layouts, rounds and register ring, no x, decode or MMA) per config on Qwen3.8-27B's gate_up,
#    and the plain-Triton read probe at W = 32 / 64 / 128 again (same run).
# 2. The real kernel at the same configs on the same layer, M = 2 and 8, in one run
#    (gpu_w12_mma_bench.py, gate_up only).
# Question: which program / round shape reads the planes at >= 4.3 TB/s (the plain probe's W = 128
# did, 61.7 us; the kernel's tuned k2r1a2s8 shape reads at 3.74-3.85), and does the kernel follow
# its loads there? If a shape's loads are fast but the kernel is not, the x loads or registers
# are next; if no Gluon shape is fast, the lane-to-row mapping that mma.sync imposes is.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
CFGS=2/1/2/8,2/1/1/8,2/1/1/4,2/1/2/4,4/1/1/8,4/1/2/8,4/1/0/4,2/2/2/8,2/2/1/4,4/2/0/4,2/1/2/8/168,4/1/1/8/128
timeout 150 python3 scripts/gpu_w12_pattern_probe.py --gluon $CFGS --words 32,64,128 \
  > $L/probe.log 2>&1
el "probe rc=$?"; cat $L/probe.log
timeout 200 python3 scripts/gpu_w12_mma_bench.py --skip-check --models qwen38-27b \
  --exclude qkv,in_proj,o_proj,down,lm_head --configs $CFGS --m 2,8 --out $L/bench.json \
  > $L/bench.log 2>&1
el "bench rc=$?"; grep -E "^qwen" $L/bench.log | cut -c1-400
