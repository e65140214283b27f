#!/usr/bin/env bash
# next GPU run (issue 5): session 19's stock-step cuts on the GPU. Kernel tests first (the conv
# kernel's chunked rewrite and commit_windows ran only in the interpreter), then exactness + speed
# with the overlapped ar, then the cost model (kernel profile: conv per launch, gdn.commit, draft.head).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
U=tests/unit; E=tests/e2e
timeout 200 python3 -m pytest -q -p no:cacheprovider -rfE $U/test_conv_kernel.py $U/test_norm_kernels.py \
  $U/test_heads.py $U/test_gdn_kernel.py $E/test_qwen3_5.py $E/test_overlap_schedule.py > $OUT/gputests.log 2>&1
el "tests rc=$?"; tail -15 $OUT/gputests.log | cut -c1-300
timeout 150 python3 scripts/gpu_graph_check.py --target qwen38-27b --accept 4.8 --draft-graph --batch 1,8 \
  --out $OUT/gc_q38.json > $OUT/gc_q38.log 2>&1; el "graph check q38 rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $OUT/gc_q38.log | tail -8 | cut -c1-220
timeout 150 python3 -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 --batch 1 --context 256 \
  --block 8 --accept 4.8 --measure --json $OUT/cost_q38.json > $OUT/cost_q38.log 2>&1; el "cost q38 rc=$?"
grep -E "^(host gap|gdn|other|attention|draft|step|  [123]\.|     kernels|floors|speedup|measured (ar|stock))" $OUT/cost_q38.log | cut -c1-200
# the decode attention's fixed cost at short context (21 us per layer in run 16): tile / split sweep at 256 tokens
timeout 240 python3 scripts/gpu_attention_check.py --quick --out $OUT/attention.json > $OUT/attention.log 2>&1; el "attention rc=$?"
grep -E "ctx.?256|splits|FAIL" $OUT/attention.log | head -30 | cut -c1-200
