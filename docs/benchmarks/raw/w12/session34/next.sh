#!/usr/bin/env bash
# Prepared in session 34, not run. Two device calls:
#   bash docs/benchmarks/raw/w12/session34/next.sh tests   # every kernel test file on the GPU
#   bash docs/benchmarks/raw/w12/session34/next.sh bench   # MmaConfig.step_acc against without
# tests: scripts/gpu_tests.sh (pytest-xdist, 12 workers), never run yet: if it fails to start,
#   its log says why. It covers the W12 tests that sessions 33-34 could not finish in a call, the
#   new bit-equality test on 300 x 1024 and the step_acc configs.
# bench: per layer and per token, the best config without and with step_acc (each tuner
#   candidate and bf16 candidate timed both ways), M = 2, 4, 8, 16; checks first on the sweep
#   shapes for two step_acc configs.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
case "${1:-}" in
tests)
  OUT=$OUT/tests LIMIT=560 bash scripts/gpu_tests.sh; el "tests rc=$?" ;;
bench)
  L=$OUT/bench; mkdir -p $L
  timeout 250 python3 scripts/gpu_w12_mma_bench.py --configs 2/1/2/8/0/1/0/1,4/1/1/4/0/3/1/1 \
    --models qwen38-27b --m 16 --time-limit 1 --out $L/check.json > $L/check.log 2>&1
  el "check rc=$?"; grep -E "PASS|FAIL|checks" $L/check.log | cut -c1-200
  timeout 330 python3 scripts/gpu_w12_mma_bench.py --skip-check --configs tuned --bf16 \
    --step-acc --m 2,4,8,16 --time-limit 300 --out $L/bench.json > $L/bench.log 2>&1
  el "bench rc=$?"; grep -A30 "per token" $L/bench.log | grep -E "step_acc|layers" ;;
*) echo "usage: $0 tests|bench" >&2; exit 2 ;;
esac
