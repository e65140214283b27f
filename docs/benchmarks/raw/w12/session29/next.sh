#!/usr/bin/env bash
# Prepared at the end of session 29 (not run; ~330 s). Session 29 found that where a PDL-launched
# kernel lets the next one launch decides how many kernels' programs sit parked in SM slots: with
# every kernel triggering before its own wait (pdl.MODE 1) and the GEMVs at their start, launches
# ran ahead and the bf16 step lost 10%; with the GEMVs triggering after their main loop (the
# default, 1/2) ar gained 3-4%. Untried: every kernel waits before it triggers (MODE 2: at most one
# kernel ahead) and the GEMVs trigger right after their wait (GEMV_TRIGGER 3: the next layer's
# programs load their first weights during this one's main loop, as the W12 chain's 2.6% gain
# with the start trigger suggested, without the pile-up). (0) the PDL GPU tests (every mode, bit
# for bit; engines' greedy output on the committed default: call 5 of session 29, not run);
# (1) the linear chain with GEMV triggers 1-3; (2) ar end to end, bf16 and W12 alternated:
# PDL off, 1/2 (the default), 2/3, 2/2.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
D=docs/benchmarks/raw/w12/session28
L=/root/logs30a; mkdir -p $L; save() { tar czf $OUT/s30a.tgz -C $L .; }
flt() { grep -vE "UserWarning|_warn_once|^\s*$" "$@"; }
timeout 120 python3 -m pytest -v -p no:cacheprovider -rfE tests/unit/test_pdl.py \
  tests/e2e/test_graph_path.py -k "pdl" > $L/tests.log 2>&1; el "tests rc=$?"
grep -E "PASSED|FAILED|ERROR|passed|failed" $L/tests.log | tail -8 | cut -c1-200; save
timeout 130 python3 scripts/gpu_linear_chain.py --target qwen38-27b --configs $D/logs/c1/gemv_m1.json \
  --kinds bf16,w12 --pdl --out $L/chain.json > $L/chain.log 2>&1; el "chain rc=$?"
flt $L/chain.log | grep -E "FAIL|layers" | cut -c1-230; save
timeout 300 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 --rounds 3 \
  --pdl 1/2,2/3,2/2 --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
flt $L/e2e.log | grep -E "round|speedup|pdl" | cut -c1-250; save; el done
