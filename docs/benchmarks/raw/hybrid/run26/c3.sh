#!/usr/bin/env bash
# Next GPU call, part 3 (issue 7), prepared in session 26: where a W12 decode step's time goes.
# The cost model's kernel profile of ar at one request on the Qwen3.8-27B shape, bf16 (the bf16
# GEMV in graphs) then --weight-format w12 (the W12 GEMV tuned at warm-up): each GEMM class in
# place, against the layer bench's figures (c2.sh) and the floors at 1.5 B per weight.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs26c; mkdir -p $L; save() { tar czf $OUT/run26c3.tgz -C $L .; }
for f in auto w12; do
  timeout 200 python3 -m specpilot.costmodel --target qwen38-27b --engine ar --batch 1 --context 256 \
    --weight-format $f --measure --json $L/cm_$f.json > $L/cm_$f.log 2>&1; el "costmodel $f rc=$?"
  grep -vE "UserWarning|_warn_once" $L/cm_$f.log | sed -n '/^component/,/^$/p' | head -16 | cut -c1-120; save
done; el done
