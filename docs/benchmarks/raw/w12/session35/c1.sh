#!/usr/bin/env bash
# Session 35, call 1: Nsight Compute on W12-MMA / bf16-MMA / cuBLAS at Qwen3.8-27B's gate_up
# (34816 x 5120), then the template GEMM's M = 32 / 64 rows (gpu_w12_bench.py).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/c1; mkdir -p $L
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
el "ncu: $NCU $($NCU --version 2>&1 | tail -1)"
CASES=w12:2:2/1/2/8/0/1/1,w12:8:2/1/2/8/0/1/1,w12:16:2/1/2/4/0/1/1,bf16:2:2/1/2/4,bf16:8:2/1/2/4,bf16:16:2/1/2/4,cublas:8
timeout 280 $NCU --profile-from-start off --clock-control none --set full --import-source no \
  -o $L/gate_up python3 scripts/gpu_w12_ncu.py --shape 34816,5120 --cases $CASES > $L/ncu.log 2>&1
el "ncu rc=$?"; tail -12 $L/ncu.log
$NCU -i $L/gate_up.ncu-rep --page details > $L/details.txt 2>&1
$NCU -i $L/gate_up.ncu-rep --page raw --csv > $L/raw.csv 2>&1
$NCU -i $L/gate_up.ncu-rep --page source --csv --print-source sass > $L/source.csv 2>&1
ls -la $L
grep -E "^  [a-z_]|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issued Warp Per|No Eligible|Memory Throughput" $L/details.txt | cut -c1-150 | head -120
el "bench M=32,64"
timeout 250 python3 scripts/gpu_w12_bench.py --quick --m 32,64 --tune-budget 140 \
  --out $L/m3264.json > $L/m3264.log 2>&1
el "bench rc=$?"; grep -v "^PASS" $L/m3264.log | tail -40 | cut -c1-200
