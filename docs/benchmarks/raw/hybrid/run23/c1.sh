#!/usr/bin/env bash
# next GPU run (issue 5): the cost model on both targets with run 22's fusions (batch 1, context
# 256, SIMULATED acceptance), to see the fused Gated DeltaNet decode kernel's own time and what a
# `stock` step still spends beyond an `ar` step (the step ratio, 1.22 / 1.25 in run 22, target
# 1.2). Logs as one tarball.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs23; mkdir -p $L
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
# session 23's review moved the gate / l2norm / update math and the fp32-gain norm into shared
# @triton.jit helpers: the kernel tests on CUDA first
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_gdn_kernel.py tests/unit/test_conv_kernel.py \
  tests/unit/test_norm_kernels.py tests/unit/test_fused_add_norm.py > $L/gputests.log 2>&1; el "kernel tests rc=$?"
tail -3 $L/gputests.log | cut -c1-300
timeout 240 python3 -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 --batch 1 \
  --context 256 --block 8 --accept 4.8 --measure --json $L/cost_q38.json > $L/cost_q38.log 2>&1; el "q38 rc=$?"
grep -E "^measured|^  [0-9]\." $L/cost_q38.log | cut -c1-260
timeout 240 python3 -m specpilot.costmodel --target muse-glimmer-30b --drafter muse-glimmer-30b-dflash2 \
  --batch 1 --context 256 --block 16 --accept 6.5 --measure --json $L/cost_muse.json > $L/cost_muse.log 2>&1
el "muse rc=$?"; grep -E "^measured|^  [0-9]\." $L/cost_muse.log | cut -c1-260
tar czf $OUT/run23.tgz -C $L .; el done
