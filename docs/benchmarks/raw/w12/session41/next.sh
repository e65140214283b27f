#!/usr/bin/env bash
# Superseded (session 42): the ring was measured slower everywhere and removed with words 2;
# `wg-bf16` (--stages) and `ncu` (4-field configs) no longer run as written. Kept as the record.
# Prepared in session 41 (no GPU lent). The wgmma kernel's weight words through a cp.async ring
# in shared memory (WgConfig.stages 3 / 4, docs/w12.md "Warpgroup-MMA kernel"): session 39's
# per-layer timings put the register loop at ~1.5 us per round with ~2 programs per SM (one
# round of planes in flight each: latency-bound); the ring keeps 2-3 rounds in flight per
# program and frees ~30 registers (g1s4 at 16 rows: 126 -> 96). Prediction: the layers with
# few programs per SM (qkv, in_proj, o_proj, down) 1.3-2x faster at 16-64 rows; the lm_heads
# (thousands of programs) little. One device call each (fits an H100):
#   bash docs/benchmarks/raw/w12/session41/next.sh wg       # ~8 min: GPU tests (ring == registers
#                                                           #   bit for bit) + W12 bench 16-64 rows
#   bash docs/benchmarks/raw/w12/session41/next.sh wg-bf16  # ~7 min: bf16_wgmma (regs / ring)
#                                                           #   against cuBLAS at 8-64 rows
#   bash docs/benchmarks/raw/w12/session41/next.sh stock-wg # ~8 min, if the ring beats cuBLAS
#     at 32 rows: W12 `stock` with the wgmma kernel routed ($SPECPILOT_W12_WGMMA=1: 17-128 rows)
#     against bf16 on Qwen3.8-27B at batch 4 (32 verify rows), one engine at a time
#   bash docs/benchmarks/raw/w12/session41/next.sh ncu      # ~4 min, if `wg` misses the
#     prediction: Nsight Compute on Qwen3.8-27B's qkv (14336 x 5120) at 16 rows, g1s4 with the
#     planes in registers, d3 and d4 rings, g1s8, mma.sync and cuBLAS: achieved DRAM throughput,
#     occupancy, and the stall reasons (long scoreboard on the planes, barrier, wgmma wait)
# If W12-WG with the ring beats the tuned mma.sync kernel at 16 rows, kernel.MMA_MAX_M moves
# to 8 or the wgmma routing takes 16 (issue 7's 1.25x at M <= 16); if it beats cuBLAS at 17-64
# rows, $SPECPILOT_W12_WGMMA on by default. If bf16-WG with the ring beats cuBLAS at a verify's
# rows, session 38's `next.sh ab` (FUSE_WGMMA in `stock`, issue 5).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
run_ncu() {   # name shape cases (as session 37's next.sh)
  timeout 200 $NCU --profile-from-start off --clock-control none --set full --import-source no \
    -o $L/$1 python3 scripts/gpu_w12_ncu.py --shape $2 --cases $3 > $L/$1.log 2>&1
  el "$1 ncu rc=$?"; tail -8 $L/$1.log
  $NCU -i $L/$1.ncu-rep --page details > $L/$1_details.txt 2>&1
  grep -E "^  [a-z_]|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|No Eligible|Stall" \
    $L/$1_details.txt | cut -c1-150 | head -90
}
case "${1:-}" in
wg)
  OUT=$L WORKERS=8 PER_TEST=200 LIMIT=200 bash scripts/gpu_tests.sh tests/unit/test_w12_wgmma.py
  el "wgmma tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log | cut -c1-250 \
    | head -20
  timeout 330 python3 scripts/gpu_w12_wgmma_bench.py --m 16,32,64 --skip-check --mma-tuned \
    --time-limit 270 --out $L/wg_bench.json > $L/wg_bench.log 2>&1
  el "wgmma bench rc=$?"; grep -E "FAILED|^qwen|^muse|per token|limit" $L/wg_bench.log \
    | cut -c1-160 ;;
wg-bf16)
  timeout 420 python3 scripts/gpu_w12_wgmma_bench.py --m 8,16,32,64 --bf16 --stages 0,3 \
    --skip-check --time-limit 360 --out $L/wg_bf16.json > $L/wg_bf16.log 2>&1
  el "wgmma bf16 bench rc=$?"; grep -E "FAILED|per token|limit" $L/wg_bf16.log | cut -c1-250
  grep -E "^qwen|^muse" $L/wg_bf16.log | sed -E 's/(ring [0-9.]+\)).*/\1/' | cut -c1-230 ;;
stock-wg)
  SPECPILOT_W12_WGMMA=1 timeout 560 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock \
    --accept 4.8 --batch 4 --rounds 2 --one-engine --out $L/stock_wg.json > $L/stock_wg.log 2>&1
  el "stock-wg rc=$?"; grep -E "speedup|round|build_s|freed|Error" $L/stock_wg.log \
    | cut -c1-300 ;;
ncu)
  run_ncu qkv16 14336,5120 \
    wg12:16:1/4/1/0,wg12:16:1/4/1/3,wg12:16:1/4/1/4,wg12:16:1/8/1/0,w12:16:2/1/2/4/0/1/0/1,cublas:16 ;;
*) echo "usage: $0 wg | wg-bf16 | stock-wg | ncu" >&2; exit 2 ;;
esac
