#!/usr/bin/env bash
# Prepared in session 28 for the next GPU call (not run yet), ~330 s. (0) GPU tests: the L2
# prefetch (runs, writes nothing) and the two escape indexes (session 28's call 3 hit its 40 s
# limit compiling, 14 of 15 passed). (1) scripts/gpu_l2_prefetch_probe.py: one token's linear
# layers with a 5 us / 10 us spin after each (the step's short kernels, HBM idle), with and
# without an L2 prefetch of the next layer's weight heads: does a prefetch that the issuing kernel
# does not wait for fill L2 during the gap, and how much of the gaps does it hide? If it does,
# the engine can issue one after each linear layer inside its graphs (bf16 and W12 alike: the
# ~1.4-1.75 ms of non-GEMV time per token on Qwen3.8-27B, w12.md session 28).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
D=docs/benchmarks/raw/w12/session28
L=/root/logs29; mkdir -p $L; save() { tar czf $OUT/s29a.tgz -C $L .; }
flt() { grep -vE "UserWarning|_warn_once|^\s*$" "$@"; }
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_prefetch.py \
  tests/unit/test_w12_kernel.py -k "prefetch or own_escape or ring or reproducible_equals or before_the_loop" \
  > $L/tests.log 2>&1; el "tests rc=$?"; tail -1 $L/tests.log | cut -c1-200; save
for gap in 5 10; do
  timeout 120 python3 scripts/gpu_l2_prefetch_probe.py --target qwen38-27b --configs $D/logs/c1/gemv_m1.json \
    --gap-us $gap --out $L/probe_gap$gap.json > $L/probe_gap$gap.log 2>&1; el "probe gap $gap rc=$?"
  flt $L/probe_gap$gap.log | grep -E "FAIL|checks|hides" | cut -c1-200; save
done
el done
