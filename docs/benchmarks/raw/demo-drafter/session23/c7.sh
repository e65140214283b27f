#!/usr/bin/env bash
# issue-8 call (after session22/c1.sh and c2a.sh put the demo model on the machine): the shipped
# drafter's speed with CUDA graphs, medians of 5 runs, with the overlap scheduler (the default)
# and without; then blocks 8 and 12 against the drafter's own 16, fp32, first 100 prompts of the
# gsm8k half and of math500 (block 16's figures over the same prompts come from fp32_R24_*.json).
set -u
T0=$(date +%s); source .gpu/setup.sh
D=$PWD/specpilot/assets/smollm2-135m-dflash; sha256sum $D/model.safetensors
timeout 100 python3 scripts/gpu_demo_speed.py --model $M --repeat 5 > $OUT/speed_overlap.log 2>&1; el "speed overlap rc=$?"
timeout 100 python3 scripts/gpu_demo_speed.py --model $M --repeat 5 --disable-overlap-schedule > $OUT/speed_plain.log 2>&1; el "speed plain rc=$?"
for f in speed_overlap speed_plain; do grep -vE "Warn|warn" $OUT/$f.log | tail -4; done
for b in 8 12; do
  timeout 200 python3 -m specpilot.train_drafter.evaluate --target $M --drafter $D --data-dir data/evals \
    --split gsm8k-heldout,math500 --limit 100 --max-new-tokens 256 --device cuda --dtype float32 \
    --block-size $b --json $OUT/fp32_block$b.json > $OUT/fp32_block$b.log 2>&1 &
done
wait; el "blocks done"; for b in 8 12; do tail -3 $OUT/fp32_block$b.log; done
