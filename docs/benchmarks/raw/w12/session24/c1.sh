#!/usr/bin/env bash
# GPU call (issue 7): the W12 CUDA-core GEMV (specpilot/w12/gemv.py) on the H200: its tests on
# CUDA, then scripts/gpu_w12_gemv_bench.py on both models' linear shapes at M = 1, 2, 4, 8
# (cuBLAS, the tuned W12 tensor-core GEMM, the bf16 GEMV, the W12 GEMV; graph replays over a
# weight ring). Logs as one tarball.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logsw12; mkdir -p $L
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_gemv.py > $L/gputests.log 2>&1
el "gemv tests rc=$?"; tail -3 $L/gputests.log | cut -c1-300
timeout 420 python3 scripts/gpu_w12_gemv_bench.py --m 1,2,4,8 --budget 150 --time-limit 330 \
  --out $L/gemv_bench.json > $L/gemv_bench.log 2>&1; el "bench rc=$?"
grep -vE "UserWarning|_warn_once" $L/gemv_bench.log | tail -60 | cut -c1-220
tar czf $OUT/w12s24.tgz -C $L .; el done
