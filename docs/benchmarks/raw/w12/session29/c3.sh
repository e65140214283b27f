#!/usr/bin/env bash
# Session 29, call 3 (~450 s). Call 1 measured PDL on the GEMVs, norms and SiLU-mul (a GEMV lets
# the next kernel launch at its start): ar end to end W12 1.033x, bf16 1.017x; chain of linear
# layers alone W12 2.6% faster, bf16 1.5% slower (its isolated down_proj 43 -> 58 us: the next
# GEMV's programs sit in SM slots from the start). Now every Triton kernel of a decode / verify
# step is launched with PDL (also conv, the Gated DeltaNet kernels, RoPE, the KV store,
# attention and its merge). (0) GPU tests: graphs and greedy output with PDL equal to without (the
# tiny Qwen3 target's ar, the tiny hybrid target's ar and stock). (1) ar end to end, bf16 and W12
# resident and alternated: PDL off, GEMVs triggering at their start ("+pdl") and after their main
# loop ("+pdl-end"). (2) issue 5's step ratio (stock / ar at one request, simulated acceptance),
# Qwen3.8-27B without and with PDL, one process each.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs29c3; mkdir -p $L; save() { tar czf $OUT/s29c3.tgz -C $L .; }
flt() { grep -vE "UserWarning|_warn_once|^\s*$" "$@"; }
timeout 120 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_pdl.py \
  tests/e2e/test_graph_path.py -k "pdl" > $L/tests.log 2>&1; el "tests rc=$?"
grep -E "passed|failed|FAIL|Error" $L/tests.log | tail -5 | cut -c1-200; save
timeout 260 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 --rounds 3 --pdl \
  --out $L/e2e.json > $L/e2e.log 2>&1; el "e2e rc=$?"
flt $L/e2e.log | grep -E "round|speedup|pdl" | cut -c1-250; save
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1 --new 96 --skip-exactness"
for run in "q_off 0" "q_on 1"; do
  set -- $run
  SPECPILOT_PDL=$2 timeout 80 $G --target qwen38-27b --accept 4.8 --out $L/$1.json > $L/$1.log 2>&1
  el "$1 rc=$?"; flt $L/$1.log | tail -2 | cut -c1-260; save
done; el done
