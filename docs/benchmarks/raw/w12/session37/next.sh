#!/usr/bin/env bash
# Prepared in session 37, not run. One device call (~5 min):
#   bash docs/benchmarks/raw/w12/session37/next.sh ncu
# Nsight Compute on the two places where W12 misses 1.25x of cuBLAS on a large layer:
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
  el "ncu: $NCU $($NCU --version 2>&1 | tail -1)"
  run_ncu gate_up16 34816,5120 \
    w12:8:2/1/2/8/136/1/0/1,w12:16:2/1/2/4/0/1/0/1,w12:16:2/1/2/8/0/1/0/1,bf16:16:2/1/2/4,cublas:16
  run_ncu muse_gate_up 39936,6656 w12:2:2/1/2/8/136/1/0/1,w12:8:2/1/2/8/136/1/0/1,cublas:2
  run_ncu muse_down 6656,19968 w12:2:2/1/2/8/0/1/0/1,w12:2:2/1/2/8/0/2/0/1,cublas:2 ;;
*) echo "usage: $0 ncu" >&2; exit 2 ;;
esac
