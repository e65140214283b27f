#!/usr/bin/env bash
# Session 48's device calls (what ran, with its tree: calls.md).
#   bash docs/benchmarks/raw/w12/session48/next.sh dspark-qwen   # ~6 min: the Markov walk kernel's
#       tests (kernels/markov.py) on the GPU, then W12 `stock` against
#       bf16 at one request, Qwen3.8-27B with its DSpark drafter (8 verify rows), SIMULATED
#       acceptance 4.0 (model_configs/README.md: the drafter's config is partly assumed)
#   bash docs/benchmarks/raw/w12/session48/next.sh dspark-muse   # ~6 min: the same, Muse-Glimmer-30B
#       (16 verify rows), SIMULATED acceptance 4.6
#   bash docs/benchmarks/raw/w12/session48/next.sh auto   # on an H200 h200a, else ws32 (session
#       48's call 1 ran it as dspark-qwen on an H100, before these modes existed)
#   bash docs/benchmarks/raw/w12/session48/next.sh markov   # ~6 min: the Markov walk kernel's
#       tests; gpu_graph_check's exactness pass (tiny fp32 targets, a DSpark drafter among them);
#       Qwen3.8-27B + DSpark `stock` at one request with the Triton walk on and off (--ab)
#   bash docs/benchmarks/raw/w12/session48/next.sh h200a   # ~6 min, for an H200: the ws bench of
#       the final candidates at 16 and 8 rows and ws.py's GPU tests (session 47's `final`), then
#       W12 `stock` against bf16 at one and two requests, Qwen3.8-27B + DFlash2 (session 46's
#       `qwen`: lands W12 in settings/h200_c1_qwen38-27b_dflash2 if faster)
#   bash docs/benchmarks/raw/w12/session48/next.sh h200b   # ~7 min, for an H200: the ws bench at 4
#       and 2 rows; W12 `stock` at one request, Muse-Glimmer-30B + DFlash2, and both targets with
#       their DSpark drafters
#   bash docs/benchmarks/raw/w12/session48/next.sh ws32   # ~7 min, any sm_90: ws.py's GPU tests
#       (17-32 rows among them: built in session 48, not yet run), then the bench with its checks
#       at 32 and 24 rows (ws against cuBLAS and the tuned template GEMM); on an H100 `auto`
#       runs it
#   final | slim | e2e: session 47's modes (docs/benchmarks/raw/w12/session47/next.sh)
#   qwen | muse | ncu: session 46's modes (docs/benchmarks/raw/w12/session46/next.sh)
set -u
case "${1:-}" in
auto) case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
        *H200*) exec bash "$0" h200a ;;
        *) exec bash "$0" ws32 ;;
      esac ;;
final|slim|e2e) exec bash docs/benchmarks/raw/w12/session47/next.sh "$@" ;;
qwen|muse|ncu) exec bash docs/benchmarks/raw/w12/session46/next.sh "$@" ;;
dspark-qwen|dspark-muse|markov|h200a|h200b|ws32) ;;
*) echo "usage: $0 auto | h200a | h200b | ws32 | dspark-qwen | dspark-muse | markov | final | slim"\
     "| e2e | qwen | muse | ncu" >&2
   exit 2 ;;
esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $L/gpu.txt
stock() {   # target drafter accept batch timeout
  timeout $5 python3 scripts/gpu_w12_e2e.py --target $1 --stock --drafter $2 --accept $3 \
    --batch $4 --rounds 2 --one-engine --out $L/stock_$1_$2.json > $L/stock_$1_$2.log 2>&1
  el "stock $1 $2 rc=$?"; grep -E "speedup|Error" $L/stock_$1_$2.log | cut -c1-300
}
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
ws32)
  OUT=$L WORKERS=8 PER_TEST=150 LIMIT=200 bash scripts/gpu_tests.sh tests/unit/test_w12_ws.py
  el "GPU tests rc=$?"; grep -E "passed|failed|FAILED|Error" $L/gpu_tests.log | cut -c1-250 \
    | head -20
  timeout 330 python3 scripts/gpu_w12_ws_bench.py --m 32,24 --time-limit 280 \
    --out $L/ws32.json > $L/ws32.log 2>&1
  el "ws bench rc=$?"; grep -vE "^PASS" $L/ws32.log | cut -c1-200 ;;
h200a)
  OUT=$OUT bash docs/benchmarks/raw/w12/session47/next.sh final
  stock qwen38-27b dflash2 4.8 1,2 300 ;;
h200b)
  timeout 150 python3 scripts/gpu_w12_ws_bench.py --skip-check --m 4,2 --time-limit 130 \
    --out $L/ws_small.json > $L/ws_small.log 2>&1
  el "ws bench rc=$?"; grep -E "per token|Error" $L/ws_small.log | cut -c1-200
  stock muse-glimmer-30b dflash2 6.5 1 200
  stock qwen38-27b dspark 4.0 1 150
  stock muse-glimmer-30b dspark 4.6 1 150 ;;
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
