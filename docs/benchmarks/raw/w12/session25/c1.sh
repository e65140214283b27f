#!/usr/bin/env bash
# Session 25, call 1 (issue 7): programmatic dependent launch for the W12 GEMV (kernels/pdl.py).
# GPU tests (the PDL chain against plain launches, the GEMV dispatch), the PDL A/B per layer and
# on an MLP chain (scripts/gpu_pdl_bench.py), then ar end to end bf16 vs w12 with PDL off and on.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs; mkdir -p $L; save() { tar czf $OUT/s25c1.tgz -C $L .; }
timeout 170 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_gemv.py -k "gpu_" \
  > $L/gputests.log 2>&1; el "gemv gpu tests rc=$?"; tail -1 $L/gputests.log | cut -c1-300
timeout 60 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_norm_kernels.py \
  tests/unit/test_fused_add_norm.py >> $L/gputests.log 2>&1; el "norm tests rc=$?"; tail -1 $L/gputests.log; save
timeout 200 python3 scripts/gpu_pdl_bench.py --out $L/pdl.json > $L/pdl.log 2>&1; el "pdl bench rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $L/pdl.log | tail -22 | cut -c1-230; save
for P in 0 1; do
  SPECPILOT_PDL=$P timeout 150 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1 \
    --out $L/e2e_pdl$P.json > $L/e2e_pdl$P.log 2>&1; el "e2e PDL=$P rc=$?"
  grep -vE "UserWarning|_warn_once|^\s*$" $L/e2e_pdl$P.log | tail -2 | cut -c1-220; save
done
el done
