#!/usr/bin/env bash
# Two drafter trainings side by side, one per GPU on a 2-GPU machine (GPUS="0 1", the default) or
# both on one GPU (GPUS="0 0": a 135M target's training steps leave the GPU partly idle), on the
# same data, then their real acceptance on held-out prompts: an ablation at the cost of one
# run. < 10 min:
#
#   MODEL=<demo model HF folder> OUT=<folder> RESUME=<exported drafter> \
#   A="<extra train flags of variant A>" B="<... of variant B>" \
#   [DATA_CACHE=<folder of data-*.jsonl caches>] [GEN_MINUTES=2.5] [TRAIN_MINUTES=5.0] \
#   [EVAL_LIMIT=5] [EVAL_SECONDS=90] bash scripts/gpu_train_demo_drafter_pair.sh
#
# 1. Data: the target's continuations of the training prompts (DATA_FLAGS below), generated in
#    two shards at once (`--generate-only --gen-shard i/2`, one per GPU of GPUS, GEN_MINUTES);
#    whatever DATA_CACHE already holds is reused (the caches are content-addressed).
#    GEN_MINUTES=0 skips this step (the data was generated before, e.g. in WORK by another call).
#    GEN_BACKEND=engine generates with our own engine instead of transformers (GEN_BATCH: its
#    running requests).
# 2. Training: variant A on the first GPU of GPUS and B on the second, TRAIN_MINUTES each, from
#    the cached data only (`--gen-fraction 0`). RESUME_A / RESUME_B (default: RESUME) are the drafters they start
#    from: an exported drafter (warm start) or a trainer state (exact resume). Exports and states
#    stay on the machine under $WORK/{A,B}/ for a later call (RESUME_A=$WORK/A/state).
# 3. Evaluation: each variant's tau with our stock engine, block 16, on the held-out splits.
# Comes back under $OUT: {A,B}/train.log (training + evaluation), {A,B}/eval.json, gen.log and
# the new data caches as data.tgz.part.* (tar + gzip, 15 MiB parts).
# A CPU dry run of the plumbing: DEVICE=cpu MAX_NEW=16 DATA_EXTRA="--max-prompts 6" EVAL_LIMIT=1.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${MODEL:?set MODEL to the demo model folder}" "${OUT:?set OUT}"
DATA="${DATA:-$PWD/data/evals}"; WORK="${WORK:-/tmp/specpilot_pair}"; PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT/A" "$OUT/B" "$WORK/data"
[ -n "${DATA_CACHE:-}" ] && cp -f "$DATA_CACHE"/data-*.jsonl "$WORK/data/"
ls "$WORK/data" > "$WORK/data_before.txt"
DATA_FLAGS=(--data-dir "$DATA" --work-dir "$WORK/data" --synthetic "${SYNTHETIC:-2400}"
  --gsm8k-variants "${VARIANTS:-0}" --samples-per-prompt "${SAMPLES:-3}" --temperature 0.8
  --max-new-tokens "${MAX_NEW:-256}" --max-len 512)
read -r -a DX <<< "${DATA_EXTRA:-}"; DATA_FLAGS+=("${DX[@]}")
DEVICE="${DEVICE:-cuda}"; read -r -a GPU <<< "${GPUS:-0 1}"
T0=$(date +%s)
el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
if [ "${GEN_MINUTES:-2.5}" = "0" ]; then el "GEN_MINUTES=0: no generation, training on the caches" | tee "$OUT/gen.log"; else
for i in 0 1; do
  CUDA_VISIBLE_DEVICES=${GPU[$i]} "$PY" -m specpilot.train_drafter --target "$MODEL" --out "$WORK/gen$i" \
    "${DATA_FLAGS[@]}" --generate-only --gen-shard "$i/2" --gen-batch-size "${GEN_BATCH:-1024}" \
    --gen-backend "${GEN_BACKEND:-hf}" \
    --max-minutes "${GEN_MINUTES:-2.5}" --device "$DEVICE" > "$WORK/gen$i.log" 2>&1 &
done
wait
cat "$WORK/gen0.log" "$WORK/gen1.log" | grep -v "it/s\]$" | grep -v "seq/s\]$" > "$OUT/gen.log"
el "data generated" | tee -a "$OUT/gen.log"
fi
run() {  # variant gpu extra-flags...
  local v=$1 gpu=$2; shift 2
  local resume_var="RESUME_$v"; local resume="${!resume_var:-${RESUME:-}}"
  local extra=(); [ -n "$resume" ] && extra+=(--resume "$resume")
  {
    CUDA_VISIBLE_DEVICES=$gpu "$PY" -m specpilot.train_drafter --target "$MODEL" "${DATA_FLAGS[@]}" \
      --out "$WORK/$v/drafter" --state-dir "$WORK/$v/state" "${extra[@]}" --gen-fraction 0 \
      --block-size 16 --target-layer-ids 1,10,19,28 --batch-size 32 --blocks-per-seq 16 \
      --lr "${LR:-5e-4}" --warmup 100 --max-minutes "${TRAIN_MINUTES:-5.0}" --save-every 1000 \
      --log-every 500 --device "$DEVICE" "$@"
    echo "train rc=$?"
    CUDA_VISIBLE_DEVICES=$gpu timeout "${EVAL_SECONDS:-90}" "$PY" -m specpilot.train_drafter.evaluate \
      --target "$MODEL" --drafter "$WORK/$v/drafter" --data-dir "$DATA" \
      --split gsm8k-heldout,math500,humaneval,mbpp-test --limit "${EVAL_LIMIT:-5}" \
      --max-new-tokens "${MAX_NEW:-256}" --device "$DEVICE" --json "$OUT/$v/eval.json"
    echo "eval rc=$? (124 = stopped at EVAL_SECONDS)"
  } 2>&1 | grep --line-buffered -v "it/s\]$" | grep --line-buffered -v "step/s\]$" > "$OUT/$v/train.log"
}
read -r -a FA <<< "${A:-}"; read -r -a FB <<< "${B:-}"
run A "${GPU[0]}" "${FA[@]}" & run B "${GPU[1]}" "${FB[@]}" &
wait
el "trained and evaluated"
for v in A B; do echo "== $v: ${!v:-}"; grep -E "^data:|^drafter:|^stopped|^split|^gsm8k|^math500|^humaneval|^mbpp|rc=" "$OUT/$v/train.log"; done
new=$(comm -13 "$WORK/data_before.txt" <(ls "$WORK/data"))
if [ -n "$new" ]; then
  (cd "$WORK/data" && tar czf - $new) | split -b 15m - "$OUT/data.tgz.part."
fi
ls -la "$OUT" "$OUT/A" "$OUT/B"
