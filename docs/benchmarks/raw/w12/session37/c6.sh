#!/usr/bin/env bash
# Session 37, call 6 (the session's last device seconds): the weight loads cached in L2 only
# (MmaConfig.plane_cg, ld.global.cg), so that the streaming planes stop evicting x from L1. At
# M = 16, x is M / 12 of the planes' bytes per 16-row program; if it misses L1, L2 serves 1.33x
# the planes' bytes. Configs with and without, Qwen3.8-27B, M = 8 and 16, one run.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
L=$OUT/c6; mkdir -p $L
C=2/1/2/4/0/1/0/1,2/1/2/4/0/1/0/1/1,2/1/2/8/136/1/0/1,2/1/2/8/136/1/0/1/1,2/1/2/8/0/1/0/1
C=$C,2/1/2/8/0/1/0/1/1
timeout 150 python3 scripts/gpu_w12_mma_bench.py --skip-check --models qwen38-27b \
  --configs $C --m 16,8 --time-limit 130 --out $L/bench.json > $L/bench.log 2>&1
echo "bench rc=$?"; grep -E "^qwen" $L/bench.log | awk '{print $2, $3, $4, $5, $6, $7, $10, $NF, $(NF-1), $(NF-2), $(NF-3), $(NF-4), $(NF-5)}'
