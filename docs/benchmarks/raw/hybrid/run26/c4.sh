#!/usr/bin/env bash
# Next GPU call, part 4 (issue 5), prepared in session 26: cuBLASLt against cuBLAS for the GEMMs
# that stay on torch's BLAS (the verify's 8-16 rows, the drafter's block rows): the stock / ar
# step ratio at one request, each side in its own process (ar and stock of one side in one run).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs26d; mkdir -p $L; save() { tar czf $OUT/run26c4.tgz -C $L .; }
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1 --new 96 --skip-exactness"
for run in "q_cublas qwen38-27b 4.8 cublas" "q_lt qwen38-27b 4.8 cublaslt" "m_lt muse-glimmer-30b 6.5 cublaslt"; do
  set -- $run
  timeout 140 $G --target $2 --accept $3 --blas $4 --out $L/$1.json > $L/$1.log 2>&1; el "$1 rc=$?"
  grep -vE "UserWarning|_warn_once|^\s*$" $L/$1.log | tail -3 | cut -c1-260; save
done; el done
