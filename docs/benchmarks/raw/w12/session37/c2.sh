#!/usr/bin/env bash
# Session 37, call 2: split-K at 9-16 activation rows on layers of many row blocks (the tuner
# offers splits only up to 5 row blocks per SM). At M = 16 the x loads alone cost ~25 us on
# gate_up (session 36's probe) and a program's x (16 x K bf16: 160 KB at K = 5120) no longer
# fits next to the streaming planes in L1; with split-K the programs resident on an SM share a
# K range, so their x working set shrinks by the split. Against cuBLAS and the tuned Triton W12
# GEMM (the engine's kernel at M = 9-16), all in one run.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c2; mkdir -p $L
C=2/1/2/8/0/1/0/1,2/1/2/4/0/1/0/1,2/1/2/8/136/1/0/1,2/1/2/8/0/2/0/1,2/1/2/8/0/4/0/1
C=$C,2/1/2/4/0/2/0/1,2/1/2/4/0/4/0/1,2/1/1/4/0/2/0/1,2/1/1/4/0/4/0/1,2/1/2/8/136/2/0/1
C=$C,2/1/2/8/136/4/0/1,2/1/1/4/0/6/0/1
timeout 560 python3 scripts/gpu_w12_mma_bench.py --skip-check --models qwen38-27b,muse-glimmer-30b \
  --configs $C --m 8,9,16 --tc-tuned --time-limit 540 --out $L/bench.json > $L/bench.log 2>&1
el "bench rc=$?"; grep -E "M=|time limit" $L/bench.log
