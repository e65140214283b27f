#!/usr/bin/env bash
# session 19 call 1: GGUF part a kept for call 2; the overlap scheduler checked and timed on Qwen3.8-27B
set -u; mkdir -p /root/parts && cp .gpu1/p.aa /root/parts/
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout ${GT:-420} python3 scripts/gpu_graph_check.py --target qwen38-27b --accept 4.8 --draft-graph --batch 1,8 \
  --out $OUT/gc_q38.json > $OUT/gc_q38.log 2>&1; el "graph check q38 rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $OUT/gc_q38.log | tail -40 | cut -c1-220
