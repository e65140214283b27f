#!/usr/bin/env bash
# Session 33 call 3: what the escapes cost the Gluon W12 kernel (stream-K removed after call 2):
# per shape the tuner's candidates, then the best one again on planes without escapes.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c3; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv > $L/gpu.txt 2>&1
timeout 300 python3 scripts/gpu_w12_mma_bench.py --skip-check --m 4,8 --configs tuned --esc-ab \
  --time-limit 260 --out $L/mma.json > $L/mma.log 2>&1
el "bench rc=$?"; grep -A12 "per token" $L/mma.log
grep -E "^(qwen|muse)" $L/mma.log | cut -c1-140
el done
