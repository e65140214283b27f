#!/usr/bin/env bash
# Next GPU call (issues 5 and 7), prepared in session 24: the kernels changed since their last
# GPU run (RoPE with the q / k head norms in its launch, the GEMV dispatch of w12_matmul, the
# norm helpers); exactness with captured graphs; the A/B of the q / k norms inside the RoPE launch
# on both targets (batch 1 and 8); Muse-Glimmer-30B's stock / ar step ratio on session 24's tree;
# then W12 end to end at batch 1 and 4. The tarball is rewritten after every step.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs25; mkdir -p $L; save() { tar czf $OUT/run25.tgz -C $L .; }
timeout 90 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_rope_kernel.py tests/unit/test_topk_kernel.py \
  tests/unit/test_norm_kernels.py tests/unit/test_fused_add_norm.py > $L/gputests.log 2>&1; el "kernel tests rc=$?"
tail -1 $L/gputests.log | cut -c1-300
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_w12_gemv.py -k "gpu_" >> $L/gputests.log 2>&1
el "gemv gpu tests rc=$?"; tail -1 $L/gputests.log | cut -c1-300; save
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1,8 --new 96"
timeout 150 $G --target qwen38-27b --accept 4.8 --out $L/q_fused.json > $L/q_fused.log 2>&1; el "q fused rc=$?"
grep -E "^exactness" $L/q_fused.log | grep -c PASS; grep -E "^exactness" $L/q_fused.log | grep -v PASS | head -3
timeout 80 $G --target qwen38-27b --accept 4.8 --skip-exactness --unfused qk_norm_rope --out $L/q_off.json > $L/q_off.log 2>&1; el "q off rc=$?"
timeout 80 $G --target muse-glimmer-30b --accept 6.5 --skip-exactness --unfused qk_norm_rope --out $L/m_off.json > $L/m_off.log 2>&1; el "m off rc=$?"
timeout 80 $G --target muse-glimmer-30b --accept 6.5 --skip-exactness --out $L/m_fused.json > $L/m_fused.log 2>&1; el "m fused rc=$?"
for f in q_fused q_off m_off m_fused; do echo "== $f"; grep -vE "UserWarning|_warn_once|^\s*$" $L/$f.log | tail -4 | cut -c1-260; done; save
timeout 240 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --batch 1,4 --out $L/w12_e2e.json > $L/w12_e2e.log 2>&1
el "w12 e2e rc=$?"; grep -vE "UserWarning|_warn_once|^\s*$" $L/w12_e2e.log | tail -4 | cut -c1-220; save; el done
