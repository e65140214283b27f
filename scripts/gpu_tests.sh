#!/usr/bin/env bash
# The test files that run our Triton / Gluon kernels, on a CUDA GPU, spread over pytest-xdist
# worker processes so that one device call (10 minutes) holds them: the time goes to compiling
# kernel variants, one process at a time otherwise (session 34: test_w12_mma.py,
# test_w12_gemv.py and test_w12_kernel.py did not finish in 160 + 110 + 110 s).
#
#   OUT=<folder> [WORKERS=12] [PER_TEST=240] [LIMIT=540] bash scripts/gpu_tests.sh [PYTEST_ARGS]
#
# No arguments: the default file list below. Arguments replace it (files, -k, ...).
# Writes $OUT/gpu_tests.log (pytest's output: failures, skips and the slowest tests) and
# $OUT/gpu_tests.xml (junit: every test's outcome and time). A test over PER_TEST seconds fails
# alone (pytest-timeout); LIMIT bounds the whole run. Needs pytest-xdist and pytest-timeout
# (the H200 image has both). Results go to docs/benchmarks/ by hand, with date and commit.
source "$(dirname "${BASH_SOURCE[0]}")/lib/gpu_env.sh"
if ! "$PY" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
    echo "gpu_tests.sh: torch sees no CUDA GPU (the files would run in the Triton interpreter;" \
         "use scripts/test.sh)" >&2
    exit 2
fi
for mod in xdist pytest_timeout; do
    "$PY" -c "import $mod" 2>/dev/null || { echo "gpu_tests.sh: needs $mod" \
        "(pip install pytest-xdist pytest-timeout)" >&2; exit 2; }
done
if [ $# -eq 0 ]; then
    set -- tests/unit/test_w12.py tests/unit/test_w12_kernel.py tests/unit/test_w12_gemv.py \
        tests/unit/test_w12_mma.py tests/unit/test_w12_wgmma.py tests/unit/test_gemv_linear.py \
        tests/unit/test_pdl.py \
        tests/unit/test_norm_kernels.py tests/unit/test_fused_add_norm.py \
        tests/unit/test_rope_kernel.py tests/unit/test_conv_kernel.py \
        tests/unit/test_dynconv_kernel.py tests/unit/test_gdn_kernel.py \
        tests/unit/test_kv_store_kernel.py tests/unit/test_noise_kernel.py \
        tests/unit/test_selector_kernel.py tests/unit/test_topk_kernel.py \
        tests/unit/test_triton_attention.py tests/unit/test_costmodel.py tests/e2e/test_graph_path.py \
        tests/unit/test_w12_ws.py tests/unit/test_markov_kernel.py \
        tests/e2e/test_w12_engine.py::test_gpu_w12_stock_graphs_equal_eager
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
T0=$(date +%s)
timeout "${LIMIT:-540}" "$PY" -m pytest -q -p no:cacheprovider -n "${WORKERS:-12}" \
    --timeout "${PER_TEST:-240}" -rfEs --durations=25 --junitxml="$OUT/gpu_tests.xml" "$@" \
    > "$OUT/gpu_tests.log" 2>&1
rc=$?
echo "gpu_tests.sh: rc=$rc in $(( $(date +%s) - T0 )) s$([ $rc -eq 124 ] && echo ' (LIMIT reached: no summary, no xml)')"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu_tests.log" | tail -30 | cut -c1-250
exit $rc
