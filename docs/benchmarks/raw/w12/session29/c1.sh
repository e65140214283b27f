#!/usr/bin/env bash
# Session 29, call 1 (~400 s): programmatic dependent launch (PDL, kernels/pdl.py): the GEMVs
# (W12 and bf16) launched with it load their first weight tiles / escape entries while the kernel
# before them finishes, then wait; the norms and SiLU-mul let the next kernel launch at once.
# (0) GPU tests: a graph of dependent norm -> GEMV layers, and ar's greedy output, equal with and
# without PDL. (1) One token's linear layers of Qwen3.8-27B as one graph, with and without PDL
# (GEMV after GEMV). (2) ar end to end at one request, bf16 and W12 resident and alternated, with
# and without PDL in the graphs (issue 7's ratio).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
D=docs/benchmarks/raw/w12/session28
L=/root/logs29c1; mkdir -p $L; save() { tar czf $OUT/s29c1.tgz -C $L .; }
flt() { grep -vE "UserWarning|_warn_once|^\s*$" "$@"; }
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_pdl.py \
  tests/e2e/test_graph_path.py -k "pdl" > $L/tests.log 2>&1; el "tests rc=$?"
grep -E "passed|failed|FAIL|Error" $L/tests.log | tail -5 | cut -c1-200; save
timeout 120 python3 scripts/gpu_linear_chain.py --target qwen38-27b --configs $D/logs/c1/gemv_m1.json \
  --kinds bf16,w12 --pdl --out $L/chain.json > $L/chain.log 2>&1; el "chain rc=$?"
flt $L/chain.log | grep -E "FAIL|layers" | cut -c1-230; save
timeout 230 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 --rounds 3 --pdl \
  --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
flt $L/e2e.log | grep -E "round|speedup|pdl" | cut -c1-250; save; el done
