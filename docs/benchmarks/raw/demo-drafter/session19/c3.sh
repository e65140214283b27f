#!/usr/bin/env bash
# session 19 call 3 (and 4): the shipped drafter timed; training resumed (weights from --resume, new
# optimizer; or a trainer state) on call 2's data; optional 20-prompt eval and speed; weights back in 2 parts.
# env: V (run name), RESUME, TM (minutes), LR, WU, SPEEDK=1 (time the shipped drafter first), EVAL=1, SPT
set -u
T0=$(date +%s); source .gpu/setup.sh
W=/root/w; V=${V:-L}
if [ "${SPEEDK:-0}" = 1 ]; then
timeout 60 python3 scripts/gpu_demo_speed.py --model $M --drafter specpilot/assets/smollm2-135m-dflash > $OUT/speed_shipped.log 2>&1; el "speed shipped rc=$?"
tail -4 $OUT/speed_shipped.log
fi
python3 -m specpilot.train_drafter --target $M --data-dir data/evals --work-dir $W/data --synthetic 20000 \
  --gsm8k-variants 20000 --samples-per-prompt 3 --temperature 0.8 --max-new-tokens 256 --max-len 512 \
  --out $W/$V/drafter --state-dir $W/$V/state --resume ${RESUME:-$PWD/specpilot/assets/smollm2-135m-dflash} --gen-fraction 0 --block-size 16 \
  --target-layer-ids 1,10,19,28 --batch-size 32 --blocks-per-seq 16 --lr ${LR:-1e-4} --warmup ${WU:-200} \
  --max-minutes ${TM:-6.0} --save-every 2000 --log-every 500 --device cuda --distill kl 2>&1 \
  | tr '\r' '\n' | grep -vE "step/s\]$|it/s\]$|^\s*$" > $OUT/train_$V.log; el "train done"
grep -E "^resuming|^drafter:|^data|sequences" $OUT/train_$V.log | cut -c1-200 | head; tail -3 $OUT/train_$V.log
D=$W/$V/drafter
cp $D/config.json $OUT/config_$V.json; cp $D/train_meta.json $OUT/train_meta_$V.json
split -n 2 -d $D/model.safetensors $OUT/$V.part.; sha256sum $D/model.safetensors
if [ "${EVAL:-0}" = 1 ]; then
timeout 100 python3 -m specpilot.train_drafter.evaluate --target $M --drafter $D --data-dir data/evals \
  --split gsm8k-heldout,math500,humaneval,mbpp-test --limit 20 --max-new-tokens 256 --device cuda \
  --json $OUT/eval_$V.json > $OUT/eval_$V.log 2>&1; el "eval rc=$?"; tail -6 $OUT/eval_$V.log
fi
ls $OUT; el done
