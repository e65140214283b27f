#!/usr/bin/env bash
# GPU run 22 (issue 5): three launches folded into others: the attention output gate inside the
# attention kernel (Qwen3.8-27B's and Muse-Glimmer-30B's gated attention), Muse's sandwich
# post-norms inside the next pre-norm's launch, and the Gated DeltaNet decode conv inside the
# recurrence kernel (Qwen3.8-27B). Kernel tests on CUDA; exactness with captured graphs (now
# with a tiny Muse target); then, per target, the speed table with the fusions (default) and
# without (--unfused), one process each, batch 1 and 8. Logs as one tarball.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=/root/logs22; mkdir -p $L
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_triton_attention.py \
  tests/unit/test_gdn_kernel.py tests/unit/test_conv_kernel.py tests/unit/test_norm_kernels.py tests/unit/test_fused_add_norm.py tests/unit/test_muse_attention.py \
  > $L/gputests.log 2>&1; el "kernel tests rc=$?"; tail -3 $L/gputests.log | cut -c1-300
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1,8 --new 96"
timeout 220 $G --target qwen38-27b --accept 4.8 --out $L/q_fused.json > $L/q_fused.log 2>&1; el "q fused rc=$?"
grep -E "^exactness" $L/q_fused.log | grep -c PASS; grep -E "^exactness" $L/q_fused.log | grep -v PASS | head
timeout 120 $G --target qwen38-27b --accept 4.8 --skip-exactness --unfused --out $L/q_unfused.json > $L/q_unfused.log 2>&1; el "q unfused rc=$?"
timeout 120 $G --target muse-glimmer-30b --accept 6.5 --skip-exactness --unfused --out $L/m_unfused.json > $L/m_unfused.log 2>&1; el "m unfused rc=$?"
timeout 120 $G --target muse-glimmer-30b --accept 6.5 --skip-exactness --out $L/m_fused.json > $L/m_fused.log 2>&1; el "m fused rc=$?"
for f in q_fused q_unfused m_unfused m_fused; do echo "== $f"; grep -vE "UserWarning|_warn_once|^\s*$" $L/$f.log | tail -4 | cut -c1-260; done
tar czf $OUT/run22.tgz -C $L .; el done
