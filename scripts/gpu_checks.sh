#!/usr/bin/env bash
# The GPU verification pass in one command (H200, < 10 minutes): each part has its own time
# limit and writes its log under $OUT, so a part that fails or runs long loses only itself.
#
#   OUT=<folder> [DEMO_MODEL=<demo model folder>] [PARTS="graph draft demo w12 attn cost"]
#   bash scripts/gpu_checks.sh
#
# graph: scripts/gpu_graph_check.py (fp32 exactness of the CUDA-graph path, then Muse-Glimmer-30B
#        ar/stock sweep, random weights, SIMULATED acceptance 6.5)
# draft: the same with --draft-graph (the drafter block pass graphed; exactness first)
# demo:  scripts/gpu_demo_speed.py (needs DEMO_MODEL: python -m specpilot.demo prints it)
# w12:   scripts/gpu_w12_bench.py   attn: scripts/gpu_attention_check.py --quick
# cost:  python -m specpilot.costmodel --measure (Muse-Glimmer-30B stock, batch 1, block 16)
# Results go to docs/benchmarks/ by hand, with the date, commit and these commands.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${OUT:?set OUT to an output folder}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PY="${PYTHON:-python3}"
T0=$(date +%s)
part() {  # name, seconds, command...
    local name=$1 limit=$2; shift 2
    case " ${PARTS:-graph draft demo w12 attn cost} " in *" $name "*) ;; *) return ;; esac
    echo "[t+$(( $(date +%s) - T0 ))s] $name (limit ${limit}s): $*"
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "[t+$(( $(date +%s) - T0 ))s] $name rc=$?"
    grep -v "^Loading\|^{" "$OUT/$name.log" | tail -14 | cut -c1-180
}
part graph 150 "$PY" scripts/gpu_graph_check.py --out "$OUT/graph.json"
part draft 150 "$PY" scripts/gpu_graph_check.py --draft-graph --out "$OUT/draft.json"
if [ -n "${DEMO_MODEL:-}" ]; then
    part demo 80 "$PY" scripts/gpu_demo_speed.py --model "$DEMO_MODEL"
fi
part w12 170 "$PY" scripts/gpu_w12_bench.py --tune-budget 70 --out "$OUT/w12.json"
part attn 100 "$PY" scripts/gpu_attention_check.py --quick --out "$OUT/attn.json"
part cost 120 "$PY" -m specpilot.costmodel --target muse-glimmer-30b \
    --drafter muse-glimmer-30b-dflash2 --batch 1 --context 256 --block 16 --accept 6.5 \
    --measure --json "$OUT/cost.json"
