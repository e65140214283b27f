#!/usr/bin/env bash
# next session's issue-8 call 3: training resumed from the shipped drafter's weights (new
# optimizer) on call 2's data, TM minutes; weights back in 2 parts, logs as one tarball; the
# evaluation is call 4. The target's competition problems are shown twice per epoch (REPEAT).
# env: V, RESUME, TM, LR, WU, REPEAT ('' for none)
set -u
T0=$(date +%s); source .gpu/setup.sh
W=/root/w; V=${V:-Q}; L=/root/logs3; mkdir -p $L; REPEAT=${REPEAT-self-instruct/competition=2}
source docs/benchmarks/raw/demo-drafter/session22/df.sh
python3 -m specpilot.train_drafter --target $M "${DF[@]}" \
  --out $W/$V/drafter --state-dir $W/$V/state --resume ${RESUME:-$PWD/specpilot/assets/smollm2-135m-dflash} --gen-fraction 0 --block-size 16 \
  --target-layer-ids 1,10,19,28 --batch-size 32 --blocks-per-seq 16 --lr ${LR:-1e-4} --warmup ${WU:-100} \
  --max-minutes ${TM:-8.3} ${REPEAT:+--repeat $REPEAT} --profile-steps 30 --save-every 2000 --log-every 500 --device cuda --distill kl 2>&1 \
  | tr '\r' '\n' | grep -vE "step/s\]$|it/s\]$|^\s*$" > $L/train_$V.log; el "train done"
grep -E "^resuming|^drafter:|^data|sequences" $L/train_$V.log | cut -c1-300 | head; tail -3 $L/train_$V.log
D=$W/$V/drafter
cp $D/config.json $L/config_$V.json; cp $D/train_meta.json $L/train_meta_$V.json; cp $W/$V/state/train_log.jsonl $L/train_log_$V.jsonl 2>/dev/null
split -n 2 -d $D/model.safetensors $OUT/$V.part.; sha256sum $D/model.safetensors
grep -A30 "^profile of" $L/train_$V.log | cut -c1-200 | head -32
tar czf $OUT/c3logs.tgz -C $L .; ls -la $OUT; el done
