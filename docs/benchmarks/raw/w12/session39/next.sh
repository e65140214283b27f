#!/usr/bin/env bash
# Session 40 (no GPU) fixed the likely cause of the W12 `stock` fault (outgrown split-K counters
# freed under captured graphs, docs/w12.md): so first `next.sh stock`; only if it still fails,
# c2.sh. Session 41 (no GPU) made the `stock*` runs hold one engine at a time
# (gpu_w12_e2e.py --one-engine: builds bf16, W12, bf16, timing the rounds A-B-B-A), so they fit
# an H100 (~78 GiB; both engines at once need ~54 + ~41 GiB). On an H100 the ratios decide
# nothing for the h200_* settings by themselves (HBM 3.35 against 4.8 TB/s): record the card.
#   bash docs/benchmarks/raw/w12/session39/next.sh stock        # ~6 min: Qwen3.8-27B batch 1, 2
#   bash docs/benchmarks/raw/w12/session39/next.sh stock-muse   # ~6 min: Muse-Glimmer-30B batch 1
#   bash docs/benchmarks/raw/w12/session39/c2.sh                # only if `stock` fails (~9 min)
#   bash docs/benchmarks/raw/w12/session39/next.sh stock-b4     # batch 4 / 8 on Qwen3.8-27B
# If c2 names a drafter layer and no fix is at hand: `next.sh stock-dense` (~6 min), a W12
# target with a bf16 drafter (--speculative-draft-weight-format bf16) against bf16.
# If W12 `stock` is faster at a setting's concurrency (on an H200), `final` takes it there:
#   settings/h200_c1_*/setting.yaml, final.landed += {name: w12, issue: 7,
#   flags: {--weight-format: w12}} (tests/workflow/test_settings.py checks the flags reach `final`).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
case "${1:-}" in
stock)
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  timeout 560 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock --accept 4.8 \
    --batch 1,2 --rounds 2 --one-engine --out $L/stock_qwen.json > $L/stock_qwen.log 2>&1
  rc=$?; el "stock qwen rc=$rc"; grep -E "speedup|round|build_s|freed|Error" $L/stock_qwen.log \
    | cut -c1-300
  if [ $rc -ne 0 ]; then   # still failing: c2.sh's two short GPU tests (the tiny engine)
    timeout 150 python3 -m pytest -q -k "gpu_w12_stock or outgrown" tests/e2e/test_w12_engine.py \
      tests/unit/test_w12_kernel.py::test_gpu_graph_survives_outgrown_split_k_counters \
      > $L/tiny.log 2>&1
    el "tiny w12 stock graphs rc=$?"; tail -5 $L/tiny.log | cut -c1-300
  fi ;;
stock-muse)
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  timeout 560 python3 scripts/gpu_w12_e2e.py --target muse-glimmer-30b --stock --accept 6.5 \
    --batch 1 --rounds 2 --one-engine --out $L/stock_muse.json > $L/stock_muse.log 2>&1
  el "stock muse rc=$?"; grep -E "speedup|round|build_s|freed|Error" $L/stock_muse.log \
    | cut -c1-300 ;;
stock-b4)
  timeout 560 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock --accept 4.8 \
    --batch 4,8 --rounds 2 --one-engine --out $L/stock_qwen_b4.json > $L/stock_qwen_b4.log 2>&1
  el "stock qwen b4/8 rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_qwen_b4.log \
    | cut -c1-300 ;;
stock-dense)
  timeout 560 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock --accept 4.8 \
    --batch 1,2 --rounds 2 --one-engine --draft-weight-format bf16 --out $L/stock_qwen_dense.json \
    > $L/stock_qwen_dense.log 2>&1
  el "stock qwen dense drafter rc=$?"; grep -E "speedup|round|build_s|Error" \
    $L/stock_qwen_dense.log | cut -c1-300 ;;
*) echo "usage: $0 stock | stock-muse | stock-b4 | stock-dense" >&2; exit 2 ;;
esac
