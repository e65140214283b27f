#!/usr/bin/env bash
# Session 42: the wgmma kernel without the weight ring and words 2 (both measured and removed),
# and W12 `stock` at two requests on Muse-Glimmer-30B. One device call (~5 min, fits an H100):
#   bash docs/benchmarks/raw/w12/session42/next.sh check
# Still open for an H200 (decides W12 in `final` of settings/h200_c1_*_dflash2):
#   bash docs/benchmarks/raw/w12/session39/next.sh stock       # Qwen3.8-27B batch 1, 2
#   bash docs/benchmarks/raw/w12/session39/next.sh stock-muse  # Muse-Glimmer-30B batch 1
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
case "${1:-}" in
check)
  OUT=$L WORKERS=8 PER_TEST=200 LIMIT=200 bash scripts/gpu_tests.sh tests/unit/test_w12_wgmma.py \
    tests/e2e/test_w12_engine.py
  el "wgmma + W12 engine GPU tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log \
    | cut -c1-250 | head -20
  timeout 300 python3 scripts/gpu_w12_e2e.py --target muse-glimmer-30b --stock --accept 6.5 \
    --batch 2 --rounds 2 --one-engine --out $L/stock_muse_b2.json > $L/stock_muse_b2.log 2>&1
  el "stock muse b2 rc=$?"; grep -E "speedup|round|build_s|freed|Error" $L/stock_muse_b2.log \
    | cut -c1-300 ;;
*) echo "usage: $0 check" >&2; exit 2 ;;
esac
