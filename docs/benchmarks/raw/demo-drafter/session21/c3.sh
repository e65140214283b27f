#!/usr/bin/env bash
# session 21 call 3: training resumed from the shipped drafter's weights (new optimizer) on call 2's
# data (old prompt set + the self-instruct problems); the whole gsm8k half and math500 evaluated on
# the GPU; the new drafter's speed; weights back in 2 parts.  env: V, RESUME, TM, LR, WU
set -u
T0=$(date +%s); source .gpu/setup.sh
W=/root/w; V=${V:-P}; L=/root/logs3; mkdir -p $L
DF=(--data-dir data/evals --work-dir $W/data --synthetic 20000 --gsm8k-variants 20000
    --samples-per-prompt 3 --temperature 0.8 --max-new-tokens 256 --max-len 512)
for s in 0 1 2 3; do DF+=(--prompts-file $W/si/q$s.jsonl); done
python3 -m specpilot.train_drafter --target $M "${DF[@]}" \
  --out $W/$V/drafter --state-dir $W/$V/state --resume ${RESUME:-$PWD/specpilot/assets/smollm2-135m-dflash} --gen-fraction 0 --block-size 16 \
  --target-layer-ids 1,10,19,28 --batch-size 32 --blocks-per-seq 16 --lr ${LR:-1e-4} --warmup ${WU:-100} \
  --max-minutes ${TM:-5} --save-every 2000 --log-every 500 --device cuda --distill kl 2>&1 \
  | tr '\r' '\n' | grep -vE "step/s\]$|it/s\]$|^\s*$" > $L/train_$V.log; el "train done"
grep -E "^resuming|^drafter:|^data|sequences" $L/train_$V.log | cut -c1-300 | head; tail -3 $L/train_$V.log
D=$W/$V/drafter
cp $D/config.json $L/config_$V.json; cp $D/train_meta.json $L/train_meta_$V.json; cp $W/$V/state/train_log.jsonl $L/train_log_$V.jsonl 2>/dev/null
split -n 2 -d $D/model.safetensors $OUT/$V.part.; sha256sum $D/model.safetensors
for sp in gsm8k-heldout math500; do
  timeout 200 python3 -m specpilot.train_drafter.evaluate --target $M --drafter $D --data-dir data/evals \
    --split $sp --limit 660 --max-new-tokens 256 --device cuda --json $L/eval_${V}_$sp.json > $L/eval_${V}_$sp.log 2>&1 &
done
wait; el "evals done"; for sp in gsm8k-heldout math500; do tail -3 $L/eval_${V}_$sp.log; done
if [ $(( $(date +%s) - T0 )) -lt 520 ]; then
timeout 60 python3 scripts/gpu_demo_speed.py --model $M --drafter $D > $L/speed_$V.log 2>&1; el "speed rc=$?"
tail -4 $L/speed_$V.log
fi
tar czf $OUT/c3logs.tgz -C $L .; ls -la $OUT; el done
