#!/usr/bin/env bash
# Prepared in session 37, not run. One device call each (~5 min):
#   bash docs/benchmarks/raw/w12/session37/next.sh ncu
#   bash docs/benchmarks/raw/w12/session37/next.sh stock
#   bash docs/benchmarks/raw/w12/session37/next.sh stock-muse
# ncu: the wgmma probe's numerics (gpu_w12_wgmma_probe.py --run), then Nsight Compute where W12
#    misses 1.25x of cuBLAS on a large layer:
# 1. M = 16 (Qwen3.8-27B's gate_up, 34816 x 5120): the tuned k2r1a2s4m against k2r1a2s8m (254
#    registers at NT 2) and k2r1a2s8g136m at M = 8, bf16-MMA and cuBLAS at 16. Session 36's probe
#    put the x loads at ~25 us of ~90 at M = 16 (3 us at M = 8), while session 37 found neither
#    halving x per weight byte (two tiles per warp) nor keeping x in L1 (plane loads .cg) a gain:
#    which stall (long scoreboard on x, MIO / LSU throttle, register-limited warps) and which
#    pipe hold the NT 2 loop?
# 2. Muse-Glimmer-30B's gate_up (39936 x 6656) at M = 2 and 8, 1.19-1.23x where Qwen3.8's is
#    1.26-1.33x and the lm_heads run at their plane floor: 2496 programs on 132 x 7 slots are 2.7
#    waves; the achieved against theoretical occupancy says whether the last wave's tail is it.
# 3. Muse-Glimmer-30B's down (6656 x 19968, 416 row blocks: under half of the 924 program slots)
#    at M = 2, unsplit (the tuner's pick, 1.21x) and split 2 (twice the programs, measured
#    slower): what a program's rate is bound by when the GPU is half filled.
# stock / stock-muse: `stock` (target + DFlash2 drafter, random weights, simulated acceptance as
#    in issue 5) with --weight-format w12 against bf16, both resident, rounds alternating
#    (gpu_w12_e2e.py --stock, new). Issue 7 asks that `final` use W12 where it measures faster;
#    no `stock` run with W12 on the real shapes exists yet. A verify runs batch x block rows per
#    GEMM: 8 / 16 / 32 at batch 1 / 2 / 4 on Qwen3.8-27B (block 8), 16 / 32 on Muse-Glimmer-30B
#    (block 16), and W12 is 1.20x of cuBLAS at 8 rows, 0.95x at 16 and the template GEMM's
#    0.54-0.66x at 32 (w12.md, sessions 35 and 37): where does stock with W12 turn slower?
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
run_ncu() {   # name shape cases
  timeout 200 $NCU --profile-from-start off --clock-control none --set full --import-source no \
    -o $L/$1 python3 scripts/gpu_w12_ncu.py --shape $2 --cases $3 > $L/$1.log 2>&1
  el "$1 ncu rc=$?"; tail -8 $L/$1.log
  $NCU -i $L/$1.ncu-rep --page details > $L/$1_details.txt 2>&1
  $NCU -i $L/$1.ncu-rep --page raw --csv > $L/$1_raw.csv 2>&1
  grep -E "^  [a-z_]|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issued Warp Per|No Eligible|L1/TEX Hit|Stall" \
    $L/$1_details.txt | cut -c1-150 | head -90
}
case "${1:-}" in
ncu)
  # first (seconds): the wgmma probe's numerics (docs/w12.md, "Not done yet")
  timeout 60 python3 scripts/gpu_w12_wgmma_probe.py --run > $L/probe.log 2>&1
  el "probe rc=$?"; grep -E "^S=|Error" $L/probe.log
  el "ncu: $NCU $($NCU --version 2>&1 | tail -1)"
  run_ncu gate_up16 34816,5120 \
    w12:8:2/1/2/8/136/1/0/1,w12:16:2/1/2/4/0/1/0/1,w12:16:2/1/2/8/0/1/0/1,bf16:16:2/1/2/4,cublas:16
  run_ncu muse_gate_up 39936,6656 w12:2:2/1/2/8/136/1/0/1,w12:8:2/1/2/8/136/1/0/1,cublas:2
  run_ncu muse_down 6656,19968 w12:2:2/1/2/8/0/1/0/1,w12:2:2/1/2/8/0/2/0/1,cublas:2 ;;
stock)
  timeout 560 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock --accept 4.8 \
    --batch 1,2,4 --rounds 2 --out $L/stock_qwen.json > $L/stock_qwen.log 2>&1
  el "stock rc=$?"; grep -E "speedup|round|build_s" $L/stock_qwen.log | cut -c1-300 ;;
stock-muse)
  timeout 560 python3 scripts/gpu_w12_e2e.py --target muse-glimmer-30b --stock --accept 6.5 \
    --batch 1,2 --rounds 2 --out $L/stock_muse.json > $L/stock_muse.log 2>&1
  el "stock rc=$?"; grep -E "speedup|round|build_s" $L/stock_muse.log | cut -c1-300 ;;
*) echo "usage: $0 ncu | stock | stock-muse" >&2; exit 2 ;;
esac
