#!/usr/bin/env bash
# Ran on tree afa58ba. The fused VERIFY kernel it measures (--ab conv_verify) was removed after
# this call (1a8e3c6: slower), so step (1) no longer runs as written.
# Session 30, call 5 (~400 s). (0) GPU tests of the Gated DeltaNet kernels (the new fused VERIFY
# kernel: conv, stash and recurrence in one launch) and the hybrid graph path. (1) Qwen3.8-27B
# stock at one request with the fused VERIFY kernel on and off in one process (graphs captured
# again, three alternating rounds; gpu_graph_check.py --ab conv_verify), after the exactness
# checks on the tiny targets (captured graphs). (2) The cost model's stock breakdown with PDL
# off: with PDL on (call 2) a kernel's profiled span starts at its early launch and includes its
# wait for the kernel before it, so per-component times overlap; off, each kernel's time is its
# own. Settings of raw/w12/session29/next2.sh.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs30c5; mkdir -p $L; save() { tar czf $OUT/s30c5.tgz -C $L .; }
flt() { grep -vE "UserWarning|_warn_once|^\s*$" "$@"; }
timeout 120 python3 -m pytest -v -p no:cacheprovider -rfE tests/unit/test_gdn_kernel.py \
  tests/e2e/test_graph_path.py -k "gdn or fused or hybrid or delta or verify" > $L/tests.log 2>&1
el "tests rc=$?"; grep -E "FAILED|ERROR|passed|failed" $L/tests.log | tail -6 | cut -c1-200; save
timeout 260 python3 scripts/gpu_graph_check.py --target qwen38-27b --accept 4.8 --batch 1 --new 96 \
  --draft-graph --ab conv_verify --rounds 3 --out $L/ab.json > $L/ab.log 2>&1; el "ab rc=$?"
flt $L/ab.log | grep -E "PASS|FAIL|^ab |^  1 |exactness" | cut -c1-260; save
SPECPILOT_PDL=0 timeout 150 python3 -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 \
  --batch 1 --context 256 --block 8 --accept 4.8 --measure --json $L/cost_q38_nopdl.json > $L/cost_q38_nopdl.log 2>&1
el "q38 rc=$?"; grep -E "^measured|^  [0-9]\." $L/cost_q38_nopdl.log | cut -c1-260; save; el done
