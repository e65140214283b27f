#!/usr/bin/env bash
# next session's issue-8 call (after c1.sh and c2a.sh put the demo model on the machine): the
# shipped drafter (run 24) on all four whole held-out splits in fp32 on the GPU, one process per
# split: tau on the exact greedy path and stock == ar counts, for the 1,824 prompts the CPU
# (2 cores, about 8 hours) cannot cover. fp32 matmuls without TF32 (torch's default).
set -u
T0=$(date +%s); source .gpu/setup.sh
D=$PWD/specpilot/assets/smollm2-135m-dflash; sha256sum $D/model.safetensors
for sp in gsm8k-heldout math500 humaneval mbpp-test; do
  timeout ${EVAL_S:-400} python3 -m specpilot.train_drafter.evaluate --target $M --drafter $D --data-dir data/evals \
    --split $sp --limit 660 --max-new-tokens 256 --device cuda --dtype float32 \
    --json $OUT/fp32_R24_$sp.json > $OUT/fp32_R24_$sp.log 2>&1 &
done
wait; el "evals done"; for sp in gsm8k-heldout math500 humaneval mbpp-test; do tail -2 $OUT/fp32_R24_$sp.log; done
