#!/usr/bin/env bash
# Session 52's device call: x resident (WsConfig.ws_xres, built this session) on the GPU.
# 1. test_w12_ws.py on the GPU (x resident against torch at 1-32 rows on the box3 shapes, its
#    PDL graph chain), through scripts/gpu_tests.sh.
# 2. The ws bench at 8 and 16 rows with x resident varied (ws_stages as the candidates', and 2:
#    at 16 rows K = 5120 leaves room for two stages only); on an H200 also the 32-row blocks
#    (session 51's open question), all in one run so that the ratios are side by side.
#   bash docs/benchmarks/raw/w12/session52/next.sh      (~7 min)
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L/t
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $L/gpu.txt
OUT=$L/t WORKERS=12 PER_TEST=200 LIMIT=200 bash scripts/gpu_tests.sh tests/unit/test_w12_ws.py \
  > $L/tests.log 2>&1
el "test_w12_ws.py rc=$?"; tail -3 $L/t/gpu_tests.log
VARY=(--vary ws_xres=1 --vary ws_xres=1,ws_stages=2)
if grep -q H200 $L/gpu.txt; then
  VARY+=(--vary ws_rows=2,ws_ewarp=1,ws_stages=2); M=16
else
  M=8,16
fi
timeout 330 python3 scripts/gpu_w12_ws_bench.py --m $M --time-limit 280 "${VARY[@]}" \
  --out $L/xres.json > $L/xres.log 2>&1
el "ws bench rc=$?"; grep -vE "^PASS" $L/xres.log | cut -c1-200
