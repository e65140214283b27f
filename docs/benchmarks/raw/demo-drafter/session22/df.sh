# shared data flags (sourced after setup.sh): the prompt set of sessions 18-21 plus every
# self-written problem file in $W/prompts; the same flags in every call so the caches match
DF=(--data-dir data/evals --work-dir $W/data --synthetic 20000 --gsm8k-variants 20000
    --samples-per-prompt 3 --temperature 0.8 --max-new-tokens 256 --max-len 512)
for f in $W/prompts/*.jsonl; do DF+=(--prompts-file $f); done
