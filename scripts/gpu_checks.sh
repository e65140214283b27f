#!/usr/bin/env bash
# The GPU verification pass in one command (H200, < 10 minutes with the default parts): each part
# has its own time limit and writes its log under $OUT, so a part that fails or runs long loses
# only itself.
#
#   OUT=<folder> [DEMO_MODEL=<demo model folder>] [PARTS="kt q38 muse cost demo"] \
#   bash scripts/gpu_checks.sh
#
# kt:    the Triton kernel tests on CUDA (norm, RoPE, conv, gated delta rule, dynamic conv)
# q38:   scripts/gpu_graph_check.py --target qwen38-27b --draft-graph (fp32 exactness of the
#        CUDA-graph path incl. the whole-step stock graph, then the ar/stock sweep at batch
#        1-32, random weights, SIMULATED acceptance 4.8; last column: separate graphs)
# muse:  the same sweep for Muse-Glimmer-30B (SIMULATED acceptance 6.5), exactness skipped
# cost:  python -m specpilot.costmodel --measure, Qwen3.8-27B stock, batches 1 and 8 (component
#        times inside the graphs)
# demo:  scripts/gpu_demo_speed.py (needs DEMO_MODEL: python -m specpilot.demo prints it)
# also available: w12 (scripts/gpu_w12_bench.py), attn (scripts/gpu_attention_check.py --quick)
# Results go to docs/benchmarks/ by hand, with the date, commit and these commands.
source "$(dirname "${BASH_SOURCE[0]}")/lib/gpu_env.sh"
T0=$(date +%s)
part() {  # name, seconds, command...
    local name=$1 limit=$2; shift 2
    case " ${PARTS:-kt q38 muse cost demo} " in *" $name "*) ;; *) return ;; esac
    echo "[t+$(( $(date +%s) - T0 ))s] $name (limit ${limit}s): $*"
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "[t+$(( $(date +%s) - T0 ))s] $name rc=$?"
    grep -v "^Loading\|^{" "$OUT/$name.log" | tail -14 | cut -c1-180
}
part kt 100 "$PY" -m pytest -q -p no:cacheprovider tests/unit/test_norm_kernels.py \
    tests/unit/test_rope_kernel.py tests/unit/test_conv_kernel.py tests/unit/test_gdn_kernel.py \
    tests/unit/test_dynconv_kernel.py
part q38 190 "$PY" scripts/gpu_graph_check.py --target qwen38-27b --accept 4.8 --draft-graph \
    --out "$OUT/q38.json"
part muse 70 "$PY" scripts/gpu_graph_check.py --draft-graph --skip-exactness --out "$OUT/muse.json"
part cost 110 "$PY" -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 \
    --batch 1,8 --context 256 --block 8 --accept 4.8 --measure --json "$OUT/cost.json"
if [ -n "${DEMO_MODEL:-}" ]; then
    part demo 80 "$PY" scripts/gpu_demo_speed.py --model "$DEMO_MODEL"
fi
part w12 170 "$PY" scripts/gpu_w12_bench.py --tune-budget 70 --out "$OUT/w12.json"
part attn 100 "$PY" scripts/gpu_attention_check.py --quick --out "$OUT/attn.json"
