#!/usr/bin/env bash
# Session 25, call 2: call 1 found the GEMV slower with PDL (prefetch + trigger at the start);
# which part costs: the PDL variants of scripts/gpu_pdl_bench.py side by side.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
L=/root/logs; mkdir -p $L
timeout 400 python3 scripts/gpu_pdl_bench.py --out $L/pdl_variants.json > $L/pdl_variants.log 2>&1
echo "rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/pdl_variants.log | tail -22 | cut -c1-250
tar czf $OUT/s25c2.tgz -C $L .
