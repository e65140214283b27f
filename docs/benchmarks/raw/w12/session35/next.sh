#!/usr/bin/env bash
# Prepared in session 35, not run. Two device calls:
#   bash docs/benchmarks/raw/w12/session35/next.sh w12    # ~4 min
#   bash docs/benchmarks/raw/w12/session35/next.sh head   # ~8 min
# w12: 1. the W12-MMA kernel's plane loads alone (gpu_w12_pattern_probe.py --gluon: the kernel's
#    layouts, rounds and register ring, no x, decode or MMA; sums checked against torch) per
#    config on Qwen3.8-27B's gate_up, and the plain-Triton read probe at W = 32 / 64 / 128 again;
#    2. the real kernel at the same configs on the same layer, M = 2 and 8 (gate_up only).
#    Question: which program / round shape reads the planes at >= 4.3 TB/s (the plain probe's
#    W = 128 did, 61.7 us; the kernel's tuned k2r1a2s8 reads at 3.74-3.85), and does the kernel
#    follow its loads there? If a shape's loads are fast and the kernel is not, the x loads or
#    the registers are next; if no Gluon shape is fast, the lane-to-row mapping mma.sync imposes.
# head: layers.linear.FUSE_MMA_HEAD (the lm_head's 2-16 rows on bf16_mma: 1.07-1.09x of cuBLAS
#    side by side, session 35): its GPU tests, then `stock` at one request with it on and off in
#    one process (Qwen3.8-27B block 8, Muse-Glimmer-30B block 16). Keep it (on by default) only if
#    both targets' steps are faster; expected about 0.1 ms per step.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
case "${1:-}" in
w12)
  CFGS=2/1/2/8,2/1/1/8,2/1/1/4,2/1/2/4,4/1/1/8,4/1/2/8,4/1/0/4,2/2/2/8,2/2/1/4,4/2/0/4,2/1/2/8/168,4/1/1/8/128
  timeout 150 python3 scripts/gpu_w12_pattern_probe.py --gluon $CFGS --words 32,64,128 \
    > $L/probe.log 2>&1
  el "probe rc=$?"; cat $L/probe.log
  timeout 200 python3 scripts/gpu_w12_mma_bench.py --skip-check --models qwen38-27b \
    --exclude qkv,in_proj,o_proj,down,lm_head --configs $CFGS --m 2,8 --out $L/bench.json \
    > $L/bench.log 2>&1
  el "bench rc=$?"; grep -E "^qwen" $L/bench.log | cut -c1-400 ;;
head)
  timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_gemv_linear.py \
    > $L/tests.log 2>&1
  el "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" $L/tests.log | head -8 | cut -c1-250
  for t in "qwen38-27b 4.8" "muse-glimmer-30b 6.5"; do
    set -- $t
    timeout 220 python3 scripts/gpu_graph_check.py --target $1 --accept $2 --batch 1 --new 96 \
      --draft-graph --skip-exactness --ab bf16_mma_head --rounds 3 --out $L/ab_$1.json \
      > $L/ab_$1.log 2>&1
    el "ab $1 rc=$?"; grep -E "^ab |ar " $L/ab_$1.log | cut -c1-250
  done ;;
*) echo "usage: $0 w12|head" >&2; exit 2 ;;
esac
