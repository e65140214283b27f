#!/usr/bin/env bash
# Session 44's device calls. Modes:
#   bash docs/benchmarks/raw/w12/session44/next.sh qwen   # ~6 min: W12 `stock` vs bf16, Qwen bs 1, 2
#   bash docs/benchmarks/raw/w12/session44/next.sh muse   # ~6 min: W12 `stock` vs bf16, Muse bs 1
#   bash docs/benchmarks/raw/w12/session44/next.sh ws     # ~2 min: the warp-specialized W12 probe
#       (scripts/gpu_w12_ws_probe.py, ran on trees 17257db / b7b9f54 in calls 2 / 3, since
#       replaced by specpilot/w12/ws.py, so this mode no longer runs): checks, then the large
#       layers at M = 8, 16 against the register loop (mma.py, 4 configs) and cuBLAS
#   bash docs/benchmarks/raw/w12/session44/next.sh wsk    # ~6 min: specpilot/w12/ws.py: the GPU
#       tests of ws.py and mma.py, then scripts/gpu_w12_ws_bench.py at M = 8, 16 (every layer)
#   bash docs/benchmarks/raw/w12/session44/next.sh wsf    # ~5 min: ws.py's GPU tests, the bench
#   bash docs/benchmarks/raw/w12/session44/next.sh wsab   # ~4 min: the bench's checks and every
#       layer, the best ws config also on planes without escapes
#   bash docs/benchmarks/raw/w12/session44/next.sh auto   # H200: `qwen`; any other card: the cost
#       model's measured report of the H100 Qwen3.8-27B setting's `final` (W12) engine, one request
# `qwen` and `muse` on an H200 decide W12 in `final` of
# settings/h200_c1_{qwen38-27b,muse-glimmer-30b}_dflash2.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$CARD"
MODE=${1:-}
if [ "$MODE" = auto ]; then case "$CARD" in *H200*) MODE=qwen ;; *) MODE=h100cm ;; esac; fi
case "$MODE" in
wsf)   # the GPU tests of ws.py alone, then the bench (checks, every layer at M = 8, 16)
  OUT=$L WORKERS=8 PER_TEST=120 LIMIT=150 bash scripts/gpu_tests.sh tests/unit/test_w12_ws.py
  el "GPU tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log | cut -c1-250 \
    | head -20
  timeout 260 python3 scripts/gpu_w12_ws_bench.py --m 8,16 --time-limit 220 --out $L/ws.json \
    > $L/ws.log 2>&1
  el "ws bench rc=$?"; grep -vE "^PASS" $L/ws.log | cut -c1-220 | tail -50
  grep -c "^PASS" $L/ws.log ;;
wsab)   # the bench's checks, then every layer with the best ws config also without escapes
  timeout 400 python3 scripts/gpu_w12_ws_bench.py --m 8,16 --ab --time-limit 360 \
    --out $L/ws_ab.json > $L/ws_ab.log 2>&1
  el "ws bench rc=$?"; grep -vE "^PASS" $L/ws_ab.log | cut -c1-220 | tail -70
  grep -c "^PASS" $L/ws_ab.log ;;
wsk)
  OUT=$L WORKERS=8 PER_TEST=150 LIMIT=170 bash scripts/gpu_tests.sh tests/unit/test_w12_ws.py \
    tests/unit/test_w12_mma.py
  el "GPU tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log | cut -c1-250 \
    | head -20
  timeout 330 python3 scripts/gpu_w12_ws_bench.py --m 8,16 --ab --time-limit 290 --out $L/ws.json \
    > $L/ws.log 2>&1
  el "ws bench rc=$?"; grep -vE "^PASS" $L/ws.log | cut -c1-220 | tail -50
  grep -c "^PASS" $L/ws.log ;;
ws)
  timeout 560 python3 scripts/gpu_w12_ws_probe.py --m 8,16 --time-limit 420 --out $L/ws.json \
    > $L/ws.log 2>&1
  el "ws probe rc=$?"; grep -vE "^   \{" $L/ws.log | cut -c1-220 | tail -60 ;;
muse)
  timeout 560 python3 scripts/gpu_w12_e2e.py --target muse-glimmer-30b --stock --accept 6.5 \
    --batch 1 --rounds 2 --one-engine --out $L/stock_muse.json > $L/stock_muse.log 2>&1
  el "stock muse rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_muse.log | cut -c1-300 ;;
qwen)
  timeout 560 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock --accept 4.8 \
    --batch 1,2 --rounds 2 --one-engine --out $L/stock_qwen.json > $L/stock_qwen.log 2>&1
  el "stock qwen rc=$?"; grep -E "speedup|round|build_s|Error" $L/stock_qwen.log | cut -c1-300 ;;
h100cm)
  timeout 540 python3 -m specpilot.costmodel --setting h100_c1_qwen38-27b_dflash2 --engine final \
    --accept 4.8 --measure --json $L/costmodel_final.json > $L/costmodel_final.log 2>&1
  el "costmodel final rc=$?"; head -70 $L/costmodel_final.log | cut -c1-200 ;;
*) echo "usage: $0 ws | wsk | wsf | wsab | qwen | muse | auto" >&2; exit 2 ;;
esac
