#!/usr/bin/env bash
# Prepared in session 36, not run. One device call each:
#   bash docs/benchmarks/raw/w12/session36/next.sh e2e4    # ~5 min
#   bash docs/benchmarks/raw/w12/session36/next.sh e2e28   # ~8 min
# `ar` end to end, W12 against bf16 in one process, at the batch sizes whose rows run the Gluon
# tensor-core kernel (M = 2-8), with session 36's tuning space (esc_mma, the 136-register
# base). Session 33 gave 1.206x / 1.193x / 1.151x at batch 2 / 4 / 8 (w12.md); the layer sums
# moved from 1.196 / 1.184 / 1.157 (session 35, Qwen3.8-27B) to 1.242 / 1.231 / 1.190 (session
# 36, call 8). The tuner runs at warm-up over the larger space (3 placements per candidate).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
L=$OUT/next; mkdir -p $L
case "${1:-}" in
e2e4) timeout 560 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 4 --rounds 2 \
        --out $L/e2e4.json > $L/e2e4.log 2>&1; echo "rc=$?"; tail -25 $L/e2e4.log ;;
e2e28) timeout 560 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 2,8 --rounds 2 \
        --out $L/e2e28.json > $L/e2e28.log 2>&1; echo "rc=$?"; tail -30 $L/e2e28.log ;;
*) echo "usage: $0 e2e4|e2e28" >&2; exit 2 ;;
esac
