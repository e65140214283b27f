#!/usr/bin/env bash
# GPU run 24, call 2 (issue 5): call 1 found the row-by-row fused VERIFY kernel slower than the
# two launches it replaced (Qwen3.8-27B stock +0.7 ms per step). The kernel now convolves all
# rows at once before the recurrence. Kernel tests; the fused kernels against the two launches
# (scripts/gpu_gdn_bench.py --fused, a few launch settings); the best verify setting for the A/B
# (SPECPILOT_GDN_FUSED_VERIFY); Qwen3.8-27B with everything fused (exactness too), with the
# verify fusion off, with the drafter fusion off; the cost model (all kernels per component).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs24b; mkdir -p $L
timeout 80 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_gdn_kernel.py tests/unit/test_conv_kernel.py \
  > $L/gputests.log 2>&1; el "kernel tests rc=$?"; tail -2 $L/gputests.log | cut -c1-300
timeout 120 python3 scripts/gpu_gdn_bench.py --fused --out $L/gdn_fused.json > $L/gdn_fused.log 2>&1; el "gdn bench rc=$?"
cat $L/gdn_fused.log | cut -c1-300
BEST=$(python3 -c "
import json; rows=json.load(open('$L/gdn_fused.json')); v=[r for r in rows if r['op']=='verify' and r['rows']==8]
keys=v[0]['fused']; print(min(keys, key=lambda k: sum(r['fused'][k]['us'] for r in v)))" 2>/dev/null || echo 16x1)
export SPECPILOT_GDN_FUSED_VERIFY=$BEST; echo "fused verify launch: $BEST"
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1,8 --new 96 --target qwen38-27b --accept 4.8"
timeout 150 $G --out $L/q_fused.json > $L/q_fused.log 2>&1; el "q fused rc=$?"
grep -E "^exactness" $L/q_fused.log | grep -c PASS; grep -E "^exactness" $L/q_fused.log | grep -v PASS | head
timeout 80 $G --skip-exactness --unfused conv_verify --out $L/q_noverify.json > $L/q_noverify.log 2>&1; el "q no-verify-fusion rc=$?"
timeout 80 $G --skip-exactness --unfused drafter --out $L/q_nodrafter.json > $L/q_nodrafter.log 2>&1; el "q no-drafter-fusion rc=$?"
for f in q_fused q_noverify q_nodrafter; do echo "== $f"; grep -vE "UserWarning|_warn_once|^\s*$" $L/$f.log | tail -4 | cut -c1-260; done
timeout 150 python3 -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 --batch 1 \
  --context 256 --block 8 --accept 4.8 --measure --json $L/cost_q38.json > $L/cost_q38.log 2>&1; el "cost q38 rc=$?"
grep -E "^measured (ar|stock)" $L/cost_q38.log | cut -c1-200
tar czf $OUT/run24b.tgz -C $L .; el done
