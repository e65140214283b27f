#!/usr/bin/env bash
# Session 43: the few-row kernel with x staged in shared memory (MmaConfig.x_smem: cp.async one
# round ahead, no x look-ahead held in registers; at 16 rows the 8-word rounds then fit without
# spills). `xs` ran on tree 054074d (call 1, docs/benchmarks/w12.md "Session 43"); x_smem was
# then removed, so `xs` no longer runs (its configs have a ninth field). Modes:
#   bash docs/benchmarks/raw/w12/session43/next.sh xs     # ~5 min: GPU tests, layers at M = 8/9/16
#   bash docs/benchmarks/raw/w12/session43/next.sh muse   # ~6 min: W12 `stock` vs bf16, Muse bs 1
#   bash docs/benchmarks/raw/w12/session43/next.sh qwen   # ~6 min: W12 `stock` vs bf16, Qwen bs 1, 2
#   bash docs/benchmarks/raw/w12/session43/next.sh card   # H200: one round of `qwen` at one
#       request (written for the few minutes of budget left; not run: no machine came); any
#       other card: the cost model's measured report of the H100 Qwen3.8-27B setting's `final`
#       (W12) engine at one request
# With a full budget on an H200, `qwen` then `muse` decide W12 in `final` of
# settings/h200_c1_{qwen38-27b,muse-glimmer-30b}_dflash2 (both also in session39/next.sh).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
case "${1:-}" in
xs)
  OUT=$L WORKERS=8 PER_TEST=200 LIMIT=200 bash scripts/gpu_tests.sh tests/unit/test_w12_mma.py
  el "mma GPU tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log | cut -c1-250 \
    | head -20
  # register configs that won layers at M = 8-16 (sessions 36-37) against x_smem ones, side by side
  C=2/1/2/8/0/1/0/1,2/1/2/4/0/1/0/1,2/1/2/8/136/1/0/1,2/1/2/4/0/2/0/1
  C=$C,2/1/1/8/0/1/0/1/1,2/1/1/8/168/1/0/1/1,2/1/1/4/0/1/0/1/1,2/1/0/8/0/1/0/1/1
  C=$C,2/1/1/4/0/2/0/1/1,2/1/1/8/0/2/0/1/1,4/1/1/8/0/1/0/1/1
  timeout 330 python3 scripts/gpu_w12_mma_bench.py --skip-check \
    --models qwen38-27b,muse-glimmer-30b --configs $C --m 8,9,16 --time-limit 300 \
    --out $L/bench.json > $L/bench.log 2>&1
  el "bench rc=$?"; grep -E "M=|time limit|Error" $L/bench.log ;;
muse)
  timeout 560 python3 scripts/gpu_w12_e2e.py --target muse-glimmer-30b --stock --accept 6.5 \
    --batch 1 --rounds 2 --one-engine --out $L/stock_muse.json > $L/stock_muse.log 2>&1
  el "stock muse rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_muse.log | cut -c1-300 ;;
qwen)
  timeout 560 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock --accept 4.8 \
    --batch 1,2 --rounds 2 --one-engine --out $L/stock_qwen.json > $L/stock_qwen.log 2>&1
  el "stock qwen rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_qwen.log | cut -c1-300 ;;
card)   # (short on budget: one round at one request on an H200)
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    timeout 360 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock --accept 4.8 \
      --batch 1 --rounds 1 --one-engine --out $L/stock_qwen.json > $L/stock_qwen.log 2>&1
    el "stock qwen rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_qwen.log | cut -c1-300
    exit 0
  fi
  timeout 340 python3 -m specpilot.costmodel --setting h100_c1_qwen38-27b_dflash2 --engine final \
    --accept 4.8 --measure --json $L/costmodel_final.json > $L/costmodel_final.log 2>&1
  el "costmodel final rc=$?"; head -60 $L/costmodel_final.log | cut -c1-200 ;;
*) echo "usage: $0 xs | muse | qwen | card" >&2; exit 2 ;;
esac
