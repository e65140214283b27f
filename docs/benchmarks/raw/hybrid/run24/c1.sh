#!/usr/bin/env bash
# GPU run 24 (issue 5): the stock step's own launches cut: the Gated DeltaNet VERIFY conv inside
# the recurrence kernel (conv_gated_delta_verify) and the drafter's fused GEMMs (q | kv per layer,
# gate_up, one context-K/V GEMM for all layers). Kernel tests on CUDA; exactness with captured
# graphs; per target the speed table with everything fused (default) and with this session's two
# fusions off (--unfused conv_verify,drafter), one process each, batch 1 and 8; then the cost
# model on Qwen3.8-27B. Logs as one tarball.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs24; mkdir -p $L
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_gdn_kernel.py tests/unit/test_conv_kernel.py \
  tests/unit/test_draft_fusion.py > $L/gputests.log 2>&1; el "kernel tests rc=$?"; tail -2 $L/gputests.log | cut -c1-300
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1,8 --new 96"
timeout 200 $G --target qwen38-27b --accept 4.8 --out $L/q_fused.json > $L/q_fused.log 2>&1; el "q fused rc=$?"
grep -E "^exactness" $L/q_fused.log | grep -c PASS; grep -E "^exactness" $L/q_fused.log | grep -v PASS | head
timeout 100 $G --target qwen38-27b --accept 4.8 --skip-exactness --unfused conv_verify,drafter --out $L/q_off.json > $L/q_off.log 2>&1; el "q off rc=$?"
timeout 100 $G --target muse-glimmer-30b --accept 6.5 --skip-exactness --unfused conv_verify,drafter --out $L/m_off.json > $L/m_off.log 2>&1; el "m off rc=$?"
timeout 100 $G --target muse-glimmer-30b --accept 6.5 --skip-exactness --out $L/m_fused.json > $L/m_fused.log 2>&1; el "m fused rc=$?"
for f in q_fused q_off m_off m_fused; do echo "== $f"; grep -vE "UserWarning|_warn_once|^\s*$" $L/$f.log | tail -4 | cut -c1-260; done
tar czf $OUT/run24.tgz -C $L .; el done
