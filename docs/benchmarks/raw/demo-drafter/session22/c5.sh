#!/usr/bin/env bash
# issue-8 call 5 (after c1.sh and c2a.sh put the demo model's parts on a fresh machine): the
# shipped drafter (run 24, in the tree) on the whole humaneval and mbpp test splits, H200 bf16.
set -u
T0=$(date +%s); source .gpu/setup.sh
D=$PWD/specpilot/assets/smollm2-135m-dflash; sha256sum $D/model.safetensors
for sp in humaneval mbpp-test; do
  timeout ${EVAL_S:-150} python3 -m specpilot.train_drafter.evaluate --target $M --drafter $D --data-dir data/evals \
    --split $sp --limit 660 --max-new-tokens 256 --device cuda --json $OUT/eval_R24_$sp.json > $OUT/eval_R24_$sp.log 2>&1 &
done
wait; el "evals done"; for sp in humaneval mbpp-test; do tail -3 $OUT/eval_R24_$sp.log; done
