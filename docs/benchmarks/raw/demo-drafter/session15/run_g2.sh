#!/usr/bin/env bash
# session 15 call 4: two trainings side by side on the call-3 data: A --distill argmax, B --distill kl
set -u
source .gpu/setup.sh
W=/root/w; ls $W/data; cat $W/data/*.jsonl | wc -l
GPUS="0 0" MODEL=$M OUT=$OUT WORK=$W RESUME=$PWD/specpilot/assets/smollm2-135m-dflash \
  A="--distill argmax" B="--distill kl" VARIANTS=${VAR:-20000} SYNTHETIC=${SY:-20000} GEN_MINUTES=0 \
  TRAIN_MINUTES=${TM:-6.8} EVAL_LIMIT=5 EVAL_SECONDS=${ES:-80} \
  timeout ${TO:-575} bash scripts/gpu_train_demo_drafter_pair.sh > $OUT/driver.log 2>&1; el "pair rc=$?"
tail -30 $OUT/driver.log | cut -c1-220
for v in A B; do grep -E "^step" $OUT/$v/train.log | tail -3; cp $OUT/$v/eval.json $W/${v}_eval.json; done
