#!/usr/bin/env bash
# Session 40 (no GPU) fixed the likely cause of the W12 `stock` fault (outgrown split-K counters
# freed under captured graphs, docs/w12.md): so first `next.sh stock` on an H200; only if it
# still fails, c2.sh. Prepared in session 39, the order was:
#   bash docs/benchmarks/raw/w12/session39/c2.sh          # ~4 min: wgmma GPU tests + where W12
#                                                          #   `stock` fails (debug.py)
#   (fix what c2 names, then)
#   bash docs/benchmarks/raw/w12/session39/next.sh stock   # ~8 min: W12 `stock` against bf16,
#                                                          #   both targets (W12 engine built first)
#   bash docs/benchmarks/raw/w12/session39/next.sh stock-b4  # batch 4 / 8 on Qwen3.8-27B
# The `stock*` runs hold the bf16 and the W12 engine at once (Qwen3.8-27B: ~54 + ~41 GiB): they
# need an H200 (device run with needs_h200); c2.sh fits an H100 (the W12 engine alone).
# If c2 names a drafter layer and no fix is at hand: `next.sh stock-dense` (~5 min), a W12
# target with a bf16 drafter (--speculative-draft-weight-format bf16) against bf16.
# If W12 `stock` is faster at a setting's concurrency, `final` takes it there:
#   settings/h200_c1_*/setting.yaml, final.landed += {name: w12, issue: 7,
#   flags: {--weight-format: w12}} (tests/workflow/test_settings.py checks the flags reach `final`).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
case "${1:-}" in
stock)
  timeout 300 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock --accept 4.8 \
    --batch 1,2 --rounds 2 --out $L/stock_qwen.json > $L/stock_qwen.log 2>&1
  el "stock qwen rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_qwen.log | cut -c1-300
  timeout 260 python3 scripts/gpu_w12_e2e.py --target muse-glimmer-30b --stock --accept 6.5 \
    --batch 1 --rounds 2 --out $L/stock_muse.json > $L/stock_muse.log 2>&1
  el "stock muse rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_muse.log | cut -c1-300 ;;
stock-b4)
  timeout 560 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock --accept 4.8 \
    --batch 4,8 --rounds 2 --out $L/stock_qwen_b4.json > $L/stock_qwen_b4.log 2>&1
  el "stock qwen b4/8 rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_qwen_b4.log \
    | cut -c1-300 ;;
stock-dense)
  timeout 320 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock --accept 4.8 \
    --batch 1,2 --rounds 2 --draft-weight-format bf16 --out $L/stock_qwen_dense.json \
    > $L/stock_qwen_dense.log 2>&1
  el "stock qwen dense drafter rc=$?"; grep -E "speedup|round|build_s|Error" \
    $L/stock_qwen_dense.log | cut -c1-300 ;;
*) echo "usage: $0 stock | stock-b4 | stock-dense   (first: c2.sh)" >&2; exit 2 ;;
esac
