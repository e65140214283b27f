#!/usr/bin/env bash
# session 18 call 3: training resumed from the shipped drafter (weights; new optimizer) on call 2's data,
# then the 20-prompt eval, the speed table and the weights back in 2 parts. env: V, TM, LR
set -u
T0=$(date +%s); source .gpu/setup.sh
W=/root/w; V=${V:-J}
python3 -m specpilot.train_drafter --target $M --data-dir data/evals --work-dir $W/data --synthetic 20000 \
  --gsm8k-variants 20000 --samples-per-prompt 3 --temperature 0.8 --max-new-tokens 256 --max-len 512 \
  --out $W/$V/drafter --state-dir $W/$V/state --resume ${RESUME:-$PWD/specpilot/assets/smollm2-135m-dflash} --gen-fraction 0 --block-size 16 \
  --target-layer-ids 1,10,19,28 --batch-size 32 --blocks-per-seq 16 --lr ${LR:-1.5e-4} --warmup ${WU:-200} \
  --max-minutes ${TM:-6.0} --save-every 2000 --log-every 500 --device cuda --distill kl 2>&1 \
  | tr '\r' '\n' | grep -vE "step/s\]$|it/s\]$|^\s*$" > $OUT/train_$V.log; el "train done"
grep -E "^resuming|^drafter:|^data|sequences" $OUT/train_$V.log | cut -c1-200 | head; tail -3 $OUT/train_$V.log
D=$W/$V/drafter
timeout 100 python3 -m specpilot.train_drafter.evaluate --target $M --drafter $D --data-dir data/evals \
  --split gsm8k-heldout,math500,humaneval,mbpp-test --limit 20 --max-new-tokens 256 --device cuda \
  --json $OUT/eval_$V.json > $OUT/eval_$V.log 2>&1; el "eval rc=$?"; tail -6 $OUT/eval_$V.log
timeout ${SPT:-50} python3 scripts/gpu_demo_speed.py --model $M --drafter $D > $OUT/speed_$V.log 2>&1; el "speed rc=$?"
tail -4 $OUT/speed_$V.log
cp $D/config.json $OUT/config_$V.json; cp $D/train_meta.json $OUT/train_meta_$V.json
split -n 2 -d $D/model.safetensors $OUT/$V.part.; sha256sum $D/model.safetensors; ls $OUT; el done
