#!/usr/bin/env bash
# Session 48's device calls (what ran, with its tree: calls.md).
#   bash docs/benchmarks/raw/w12/session48/next.sh dspark-qwen   # ~6 min: the Markov walk kernel's
#       tests (kernels/markov.py) on the GPU, then W12 `stock` against
#       bf16 at one request, Qwen3.8-27B with its DSpark drafter (8 verify rows), SIMULATED
#       acceptance 4.0 (model_configs/README.md: the drafter's config is partly assumed)
#   bash docs/benchmarks/raw/w12/session48/next.sh dspark-muse   # ~6 min: the same, Muse-Glimmer-30B
#       (16 verify rows), SIMULATED acceptance 4.6
#   bash docs/benchmarks/raw/w12/session48/next.sh auto   # on an H200 session 46's `qwen` (W12
#       `stock` on the H200 DFlash2 deployment); else dspark-qwen
#   bash docs/benchmarks/raw/w12/session48/next.sh markov   # ~6 min: the Markov walk kernel's
#       tests; gpu_graph_check's exactness pass (tiny fp32 targets, a DSpark drafter among them);
#       Qwen3.8-27B + DSpark `stock` at one request with the Triton walk on and off (--ab)
#   final | slim | e2e: session 47's modes (docs/benchmarks/raw/w12/session47/next.sh)
#   qwen | muse | ncu: session 46's modes (docs/benchmarks/raw/w12/session46/next.sh)
set -u
case "${1:-}" in
auto) case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
        *H200*) exec bash docs/benchmarks/raw/w12/session46/next.sh qwen ;;
        *) exec bash "$0" dspark-qwen ;;
      esac ;;
final|slim|e2e) exec bash docs/benchmarks/raw/w12/session47/next.sh "$@" ;;
qwen|muse|ncu) exec bash docs/benchmarks/raw/w12/session46/next.sh "$@" ;;
dspark-qwen|dspark-muse|markov) ;;
*) echo "usage: $0 auto | dspark-qwen | dspark-muse | markov | final | slim | e2e | qwen | muse |"\
     "ncu" >&2
   exit 2 ;;
esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $L/gpu.txt
dspark() {   # target accept
  OUT=$L WORKERS=4 PER_TEST=60 LIMIT=80 bash scripts/gpu_tests.sh tests/unit/test_markov_kernel.py
  el "markov kernel tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log \
    | cut -c1-250 | head -5
  timeout 560 python3 scripts/gpu_w12_e2e.py --target $1 --stock --drafter dspark --accept $2 \
    --batch 1 --rounds 2 --one-engine --out $L/dspark_$1.json > $L/dspark_$1.log 2>&1
  el "dspark $1 rc=$?"; grep -E "speedup|round|build_s|Error" $L/dspark_$1.log | cut -c1-300
}
case "${1:-}" in
dspark-qwen) dspark qwen38-27b 4.0 ;;
dspark-muse) dspark muse-glimmer-30b 4.6 ;;
markov)
  OUT=$L WORKERS=4 PER_TEST=60 LIMIT=80 bash scripts/gpu_tests.sh tests/unit/test_markov_kernel.py
  el "markov kernel tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log \
    | cut -c1-250 | head -5
  timeout 420 python3 scripts/gpu_graph_check.py --target qwen38-27b --drafter dspark \
    --accept 4.0 --batch 1 --draft-graph --ab markov_walk --rounds 3 --long 2048 \
    --out $L/markov_ab.json > $L/markov_ab.log 2>&1
  el "graph check rc=$?"; grep -E "exactness|^ab |ms/step|Error" $L/markov_ab.log | cut -c1-200 \
    | tail -40 ;;
esac
