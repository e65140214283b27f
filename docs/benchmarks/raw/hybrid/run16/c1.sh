#!/usr/bin/env bash
# session 18 call 1: GGUF part a kept; GPU tests of session 17's kernels; both cost models; noise bench
set -u; mkdir -p /root/parts && cp .gpu1/p.aa /root/parts/
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
U=tests/unit; E=tests/e2e
timeout 330 python3 -m pytest -q -p no:cacheprovider -rfE $U/test_noise_kernel.py $U/test_kv_store_kernel.py $U/test_rope_kernel.py $U/test_conv_kernel.py $U/test_gdn_kernel.py $U/test_norm_kernels.py $U/test_muse_attention.py $U/test_fused_add_norm.py $U/test_dynconv_kernel.py $U/test_sampler.py $U/test_accept.py $U/test_costmodel.py $U/test_triton_attention.py $E/test_graph_path.py $E/test_qwen3_5.py $E/test_muse_glimmer.py $E/test_stock_sampling.py > $OUT/gputests.log 2>&1; el "tests rc=$?"; tail -30 $OUT/gputests.log | cut -c1-300
timeout 60 python3 docs/benchmarks/raw/demo-drafter/session17/noise_bench.py cuda > $OUT/noise_cuda.log 2>&1; el "noise rc=$?"; grep -v USDT $OUT/noise_cuda.log | tail -8
timeout 150 python3 -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 --batch 1 --context 256 --block 8 --accept 4.8 --measure --json $OUT/cost_q38.json > $OUT/cost_q38.log 2>&1; el "cost q38 rc=$?"; grep -E "^(host gap|gdn|other|attention|draft|step|  [123]\.|     kernels|floors|speedup|measured (ar|stock))" $OUT/cost_q38.log | cut -c1-200
timeout 150 python3 -m specpilot.costmodel --target muse-glimmer-30b --drafter muse-glimmer-30b-dflash2 --batch 1 --context 256 --block 16 --accept 6.5 --measure --json $OUT/cost_muse.json > $OUT/cost_muse.log 2>&1; el "cost muse rc=$?"; grep -E "^(host gap|other|attention|draft|step|  [123]\.|     kernels|floors|speedup|measured (ar|stock))" $OUT/cost_muse.log | cut -c1-200
ls -la $OUT
