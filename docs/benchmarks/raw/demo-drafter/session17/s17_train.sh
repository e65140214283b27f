#!/usr/bin/env bash
# session 17: one training run alone on the GPU, then the 20-prompt eval, the speed table and the
# weights back in parts. env: V (run name), RESUME (drafter dir or state dir), EXTRA (flags, e.g.
# "--grow-layers 2"), TM (minutes), LR, RESTORE=1 (untar the data caches first; carry .gpu10).
# carry: .gpu .gpu3 .gpu5 [.gpu10]
set -u
source .gpu/setup.sh  # = raw/demo-drafter/session15/setup.sh
W=/root/w; mkdir -p $W/data
if [ "${RESTORE:-0}" = 1 ]; then tar xzf .gpu10/alldata.tgz -C $W/data; cat $W/data/*.jsonl | wc -l; fi
read -r -a EX <<< "${EXTRA:-}"
python3 -m specpilot.train_drafter --target $M --data-dir data/evals --work-dir $W/data --synthetic 20000 \
  --gsm8k-variants 20000 --samples-per-prompt 3 --temperature 0.8 --max-new-tokens 256 --max-len 512 \
  --out $W/$V/drafter --state-dir $W/$V/state --resume $RESUME "${EX[@]}" --gen-fraction 0 --block-size 16 \
  --target-layer-ids 1,10,19,28 --batch-size 32 --blocks-per-seq 16 --lr ${LR:-4e-4} --warmup 100 \
  --max-minutes ${TM:-7.5} --save-every 2000 --log-every 500 --device cuda --distill kl 2>&1 \
  | tr '\r' '\n' | grep -vE "step/s\]$|it/s\]$|^\s*$" > $OUT/train_$V.log; el "train done"
grep -E "^resuming|^drafter:" $OUT/train_$V.log | cut -c1-160; tail -3 $OUT/train_$V.log
D=$W/$V/drafter
timeout 100 python3 -m specpilot.train_drafter.evaluate --target $M --drafter $D --data-dir data/evals \
  --split gsm8k-heldout,math500,humaneval,mbpp-test --limit ${EL:-20} --max-new-tokens 256 --device cuda \
  --json $OUT/eval_$V.json > $OUT/eval_$V.log 2>&1; el "eval rc=$?"; tail -6 $OUT/eval_$V.log
timeout 60 python3 scripts/gpu_demo_speed.py --model $M --drafter $D > $OUT/speed_$V.log 2>&1; el "speed rc=$?"
tail -4 $OUT/speed_$V.log
cp $D/config.json $OUT/config_$V.json; cp $D/train_meta.json $OUT/train_meta_$V.json
split -b 15m $D/model.safetensors $OUT/$V.part.; sha256sum $D/model.safetensors; ls $OUT
