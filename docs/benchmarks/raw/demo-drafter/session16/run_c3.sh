#!/usr/bin/env bash
# next session, call 3 (after the two GGUF-part calls): restore every data cache (.gpu10), then
# A: the shipped run-10 drafter continued (2 layers) vs B: grown to 4 layers, side by side, kl.
# carry: .gpu .gpu3 .gpu5 .gpu10
set -u
source .gpu/setup.sh
W=/root/w; mkdir -p $W/data; tar xzf .gpu10/alldata.tgz -C $W/data; cat $W/data/*.jsonl | wc -l
GPUS="0 0" MODEL=$M OUT=$OUT WORK=$W RESUME=$PWD/specpilot/assets/smollm2-135m-dflash \
  A="--distill kl" B="--distill kl --grow-layers 2" VARIANTS=20000 SYNTHETIC=20000 GEN_MINUTES=0 \
  LR=${LR:-4e-4} TRAIN_MINUTES=${TM:-7.0} EVAL_LIMIT=${EL:-20} EVAL_SECONDS=${ES:-120} \
  timeout ${TO:-575} bash scripts/gpu_train_demo_drafter_pair.sh > $OUT/driver.log 2>&1; el "pair rc=$?"
tail -24 $OUT/driver.log | cut -c1-220
for v in A B; do grep -E "^step" $OUT/$v/train.log | tail -2; cp $OUT/$v/eval.json $W/${v}_eval.json; done
