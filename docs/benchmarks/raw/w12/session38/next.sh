#!/usr/bin/env bash
# Prepared in session 38 (no GPU was lent), not run. One device call each:
#   bash docs/benchmarks/raw/w12/session38/next.sh wg          # ~6 min
#   bash docs/benchmarks/raw/w12/session38/next.sh wg-bf16     # ~5 min (if wg passed)
#   bash docs/benchmarks/raw/w12/session38/next.sh ab          # ~6 min (if bf16-WG beat cuBLAS)
#   bash docs/benchmarks/raw/w12/session38/next.sh stock       # ~9 min (if wg passed)
#   bash docs/benchmarks/raw/w12/session37/next.sh ncu | stock-muse   (still pending)
# wg: the warpgroup-MMA W12 kernel (specpilot/w12/wgmma.py, new, compiled for sm_90 only so far):
#   1. its GPU tests (numerics against float64 torch at M = 1-128, split-K, per-row bases,
#      escapes, N and K not multiples of the tiles, PDL and CUDA graphs) and the wgmma probe's
#      --run;
#   2. gpu_w12_wgmma_bench.py (its own checks skipped: the tests ran): per layer of Qwen3.8-27B
#      and Muse-Glimmer-30B at M = 16, 32, 64: cuBLAS, the template W12 GEMM (what the engine
#      runs above 16 rows today), the mma.sync kernel at 16, and the wgmma kernel over its
#      candidates (largest layers first until the time limit); per-token sums.
#   If it beats the template at 17-128 rows, set SPECPILOT_W12_WGMMA on by default (kernel.py),
#   and if it beats cuBLAS, `final` with --weight-format w12 becomes worth measuring at batch > 1.
# wg-bf16: bf16_wgmma (the same loop on bf16 words) against cuBLAS and W12 at 8, 16, 32, 64 rows
#   (a verify's rows at batch 1-4 on Qwen3.8-27B, 1-2 on Muse-Glimmer-30B). Issue 5: the verify's
#   GEMMs at 16 rows cost Muse-Glimmer-30B's `stock` step +0.89 ms over `ar`'s GEMVs (session 30).
# ab: if bf16-WG beat cuBLAS on a target's layers, `stock` with FUSE_WGMMA on and off in one
#   process (gpu_graph_check.py --ab bf16_wgmma, the verify's and drafter's GEMMs).
# stock: `stock` with --weight-format w12 against bf16 (gpu_w12_e2e.py --stock, simulated
#   acceptance tau 4.8, block 8, batch 1 / 2 / 4: 8 / 16 / 32 verify rows) with the wgmma kernel
#   routed (SPECPILOT_W12_WGMMA=1) for the 32-row verifies.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
case "${1:-}" in
wg)
  timeout 60 python3 scripts/gpu_w12_wgmma_probe.py --run > $L/probe.log 2>&1
  el "probe rc=$?"; grep -E "^S=|Error" $L/probe.log
  OUT=$L WORKERS=8 PER_TEST=200 LIMIT=220 bash scripts/gpu_tests.sh tests/unit/test_w12_wgmma.py \
    tests/unit/test_gemv_linear.py
  el "wgmma tests rc=$?"
  timeout 320 python3 scripts/gpu_w12_wgmma_bench.py --m 16,32,64 --skip-check --time-limit 290 \
    --out $L/wg_bench.json > $L/wg_bench.log 2>&1
  el "wgmma bench rc=$?"; grep -E "PASS|FAIL|^qwen|^muse|per token|limit" $L/wg_bench.log | cut -c1-190 ;;
wg-bf16)
  timeout 400 python3 scripts/gpu_w12_wgmma_bench.py --m 8,16,32,64 --bf16 --skip-check \
    --time-limit 330 --out $L/wg_bf16.json > $L/wg_bf16.log 2>&1
  el "wgmma bf16 bench rc=$?"; grep -E "^qwen|^muse|per token|limit" $L/wg_bf16.log | cut -c1-230 ;;
ab)
  for t in "qwen38-27b 4.8" "muse-glimmer-30b 6.5"; do set -- $t
    timeout 280 python3 scripts/gpu_graph_check.py --target $1 --accept $2 --batch 1 --new 96 \
      --draft-graph --skip-exactness --ab bf16_wgmma --rounds 3 > $L/ab_$1.log 2>&1
    el "ab $1 rc=$?"; grep -E "^ab |ratio|Error" $L/ab_$1.log | cut -c1-250
  done ;;
stock)
  SPECPILOT_W12_WGMMA=1 timeout 560 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock \
    --accept 4.8 --batch 1,2,4 --rounds 2 --out $L/stock_qwen.json > $L/stock_qwen.log 2>&1
  el "stock rc=$?"; grep -E "speedup|round|build_s" $L/stock_qwen.log | cut -c1-300 ;;
*) echo "usage: $0 wg | wg-bf16 | ab | stock" >&2; exit 2 ;;
esac
