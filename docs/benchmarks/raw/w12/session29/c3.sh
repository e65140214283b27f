#!/usr/bin/env bash
# Session 29, call 3 (~400 s): where a PDL-launched GEMV lets the next kernel launch. Call 1
# (trigger at the GEMV's start): W12 chain 2.6% faster, bf16 chain 1.5% slower (its isolated
# down_proj 43 -> 58 us: the next GEMV's programs sit in SM slots from the start); ar end to end
# W12 1.033x, bf16 1.017x. Here also "pdl-end" (trigger after the main loop), chain and end to
# end, same process each. (0) the PDL tests (a CPU-only test made to skip there: call 1's one
# failure).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
D=docs/benchmarks/raw/w12/session28
L=/root/logs29c3; mkdir -p $L; save() { tar czf $OUT/s29c3.tgz -C $L .; }
flt() { grep -vE "UserWarning|_warn_once|^\s*$" "$@"; }
timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_pdl.py \
  tests/e2e/test_graph_path.py -k "pdl" > $L/tests.log 2>&1; el "tests rc=$?"
grep -E "passed|failed|FAIL|Error" $L/tests.log | tail -5 | cut -c1-200; save
timeout 130 python3 scripts/gpu_linear_chain.py --target qwen38-27b --configs $D/logs/c1/gemv_m1.json \
  --kinds bf16,w12 --pdl --out $L/chain.json > $L/chain.log 2>&1; el "chain rc=$?"
flt $L/chain.log | grep -E "FAIL|layers" | cut -c1-230; save
timeout 300 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 --rounds 3 --pdl \
  --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
flt $L/e2e.log | grep -E "round|speedup|pdl" | cut -c1-250; save; el done
