#!/usr/bin/env bash
# Prepared in session 28 for the next GPU call (not run yet), ~500 s. (0) GPU tests: the L2
# prefetch (runs, writes nothing; a graph with it equals one without, bit for bit; greedy ar
# output with it in the engine's captured graphs equals output without) and the two
# escape indexes (session 28's call 3 hit its 40 s limit compiling; 14 of 15 passed). (1)
# scripts/gpu_l2_prefetch_probe.py: one token's linear layers of Qwen3.8-27B with a 5 us spin after
# each (standing in for the step's short kernels, HBM idle), with and without an L2 prefetch of
# the next layer's weight head: does a prefetch that no kernel waits for fill L2 during the gap,
# and how much of the gaps does it hide? (2) ar end to end, bf16 and W12 resident and alternated,
# with the prefetch inside the graphs (layers/linear.py, L2_PREFETCH) at two settings.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
D=docs/benchmarks/raw/w12/session28
L=/root/logs29; mkdir -p $L; save() { tar czf $OUT/s29a.tgz -C $L .; }
flt() { grep -vE "UserWarning|_warn_once|^\s*$" "$@"; }
timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_prefetch.py \
  tests/unit/test_w12_kernel.py tests/e2e/test_graph_path.py \
  -k "prefetch or own_escape or ring or reproducible_equals or before_the_loop" \
  > $L/tests.log 2>&1; el "tests rc=$?"; tail -1 $L/tests.log | cut -c1-200; save
timeout 110 python3 scripts/gpu_l2_prefetch_probe.py --target qwen38-27b --configs $D/logs/c1/gemv_m1.json \
  --gap-us 5 --out $L/probe.json > $L/probe.log 2>&1; el "probe rc=$?"
flt $L/probe.log | grep -E "FAIL|checks|hides" | cut -c1-200; save
timeout 270 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 --rounds 3 \
  --l2-prefetch head:16,rows:512 --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
flt $L/e2e.log | grep -E "round|speedup|L2 prefetch" | cut -c1-250; save; el done
