#!/usr/bin/env bash
# Train a DFlash drafter for the demo target (SmolLM2-135M-Instruct) on one H200, then measure
# its real acceptance length tau with our stock engine on held-out prompts. One command, < 10 min:
#
#   MODEL=<demo model HF folder> [DATA=<folder with gsm8k_test.jsonl, mbpp.jsonl,
#   math500_test.jsonl, humaneval.jsonl; default: the repo's data/evals>] OUT=<output folder>
#   [RESUME=<folder>] bash scripts/gpu_train_demo_drafter.sh
#
# RESUME (optional, any path outside $OUT): a folder with trainer_state.pt (exact resume) or a
# drafter exported by an earlier run, e.g. its fetched $OUT/drafter (warm start: weights only).
# DATA_CACHE (optional): a folder of data-*.jsonl caches from an earlier run (its $OUT/data), so
# the target's continuations are not generated again; this run's caches come back in $OUT/data.
# Knobs (env): TRAIN_MINUTES (6.0, data generation included), EVAL_SECONDS (150), EVAL_LIMIT (10
# prompts per split), LAYERS (2), BLOCK (16), SYNTHETIC (600), BATCH (16), BLOCKS (16), LR (6e-4),
# LAYER_IDS (target layers fed to the drafter, e.g. 1,10,19,28; default: one per draft layer),
# SAMPLES (1: greedy only; N adds N-1 sampled continuations per prompt), TEMP (0.8), GEN_BATCH (256),
# GEN_BACKEND (engine: our engine makes the data, 6.8x transformers' rate on an H200; hf),
# DISTILL (kl: rows learn the target's distribution, as the shipped drafter did; argmax; none),
# VARIANTS (0: gsm8k variants to add),
# WORK (/tmp/specpilot_train: data cache and the 90 MB trainer state, which stay on the machine);
# for a dry run elsewhere: DEVICE (cuda), MAX_PROMPTS (all), MAX_NEW (256 tokens, data and eval).
# Comes back under $OUT (7 files + data caches + drafter_parts, each < 16 MiB): drafter/{config.json, model.safetensors (bf16,
# ~15 MiB for 2 layers), train_meta.json}, train.log, train_log.jsonl, eval.log, eval.json.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DATA="${DATA:-$PWD/data/evals}"
: "${MODEL:?set MODEL to the demo model folder}"
[ -f "$DATA/gsm8k_test.jsonl" ] || { echo "DATA=$DATA lacks gsm8k_test.jsonl"; exit 1; }
OUT="${OUT:-/tmp/gpu_train_demo_drafter}"; WORK="${WORK:-/tmp/specpilot_train}"
mkdir -p "$OUT/data" "$WORK/work"
[ -n "${DATA_CACHE:-}" ] && cp -f "$DATA_CACHE"/data-*.jsonl "$WORK/work/"
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
PY="${PYTHON:-python3}"
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$PY" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  git rev-parse HEAD 2>/dev/null || true
} 2>&1 | tee "$OUT/train.log"

EXTRA=()
[ -n "${RESUME:-}" ] && EXTRA+=(--resume "$RESUME")
[ -n "${MAX_PROMPTS:-}" ] && EXTRA+=(--max-prompts "$MAX_PROMPTS")
[ -n "${LAYER_IDS:-}" ] && EXTRA+=(--target-layer-ids "$LAYER_IDS")
DEVICE="${DEVICE:-cuda}"; MAX_NEW="${MAX_NEW:-256}"
"$PY" -m specpilot.train_drafter --target "$MODEL" --data-dir "$DATA" --out "$OUT/drafter" \
  --work-dir "$WORK/work" --state-dir "$WORK/state" "${EXTRA[@]}" \
  --layers "${LAYERS:-2}" --block-size "${BLOCK:-16}" --synthetic "${SYNTHETIC:-600}" \
  --max-new-tokens "$MAX_NEW" --max-len 512 --gen-batch-size "${GEN_BATCH:-256}" \
  --gen-backend "${GEN_BACKEND:-engine}" --distill "${DISTILL:-kl}" --gsm8k-variants "${VARIANTS:-0}" \
  --gen-fraction "${GEN_FRACTION:-0.45}" --samples-per-prompt "${SAMPLES:-1}" --temperature "${TEMP:-0.8}" \
  --batch-size "${BATCH:-16}" --blocks-per-seq "${BLOCKS:-16}" --lr "${LR:-6e-4}" --warmup 100 \
  --max-minutes "${TRAIN_MINUTES:-6.0}" --save-every 1000 --log-every 100 --device "$DEVICE" \
  2>&1 | tee -a "$OUT/train.log"
rc=${PIPESTATUS[0]}
cp -f "$WORK/state/train_log.jsonl" "$OUT/train_log.jsonl" 2>/dev/null || true
cp -f "$WORK"/work/data-*.jsonl "$OUT/data/" 2>/dev/null || true
if [ "$rc" -ne 0 ] || [ ! -f "$OUT/drafter/model.safetensors" ]; then
  echo "training failed (rc=$rc)"; exit 1
fi
ls -l "$OUT/drafter" | tee -a "$OUT/train.log"
# the device tool brings back files < 16 MiB: a larger export also comes back in 15 MiB parts
# (rebuild with: cat model.safetensors.part.* > model.safetensors)
if [ "$(stat -c %s "$OUT/drafter/model.safetensors")" -ge 16000000 ]; then
  mkdir -p "$OUT/drafter_parts" && split -b 15m "$OUT/drafter/model.safetensors" \
    "$OUT/drafter_parts/model.safetensors.part."
  sha256sum "$OUT/drafter/model.safetensors" > "$OUT/drafter_parts/sha256"
fi

timeout "${EVAL_SECONDS:-150}" "$PY" -m specpilot.train_drafter.evaluate --target "$MODEL" \
  --drafter "$OUT/drafter" --data-dir "$DATA" --split gsm8k-heldout,math500,humaneval,mbpp-test \
  --limit "${EVAL_LIMIT:-10}" --max-new-tokens "$MAX_NEW" --device "$DEVICE" --json "$OUT/eval.json" \
  2>&1 | grep -v "^Loading weights" | tee "$OUT/eval.log"
echo "eval rc=${PIPESTATUS[0]} (124 = stopped at EVAL_SECONDS)"
