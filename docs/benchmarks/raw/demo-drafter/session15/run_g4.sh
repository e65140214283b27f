#!/usr/bin/env bash
# session 15 call 6: B (kl) resumed exactly, alone on the GPU, then 10-prompt eval + speed
set -u
source .gpu/setup.sh
W=/root/w; cp -r $W/B/state $W/Bstate_r9
python3 -m specpilot.train_drafter --target $M --data-dir data/evals --work-dir $W/data --synthetic 20000 \
  --gsm8k-variants 20000 --samples-per-prompt 3 --temperature 0.8 --max-new-tokens 256 --max-len 512 \
  --out $W/C/drafter --state-dir $W/C/state --resume $W/B/state --gen-fraction 0 --block-size 16 \
  --target-layer-ids 1,10,19,28 --batch-size 32 --blocks-per-seq 16 --lr ${LR:-4e-4} --warmup 100 \
  --max-minutes ${TM:-5.6} --save-every 2000 --log-every 500 --device cuda --distill kl 2>&1 \
  | tr '\r' '\n' | grep -vE "step/s\]$|it/s\]$|^\s*$" > $OUT/train_C.log; el "train done"
tail -5 $OUT/train_C.log
D=$W/C/drafter
timeout 100 python3 -m specpilot.train_drafter.evaluate --target $M --drafter $D --data-dir data/evals \
  --split gsm8k-heldout,math500,humaneval,mbpp-test --limit 10 --max-new-tokens 256 --device cuda \
  --json $OUT/evalC10.json > $OUT/evalC10.log 2>&1; el "eval rc=$?"; tail -6 $OUT/evalC10.log
timeout 60 python3 scripts/gpu_demo_speed.py --model $M --drafter $D > $OUT/speed_C.log 2>&1; el "speed rc=$?"
tail -4 $OUT/speed_C.log
cp $D/train_meta.json $OUT/train_meta_C.json; split -b 15m $D/model.safetensors $OUT/c.part.
sha256sum $D/model.safetensors; ls -la $OUT
