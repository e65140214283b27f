#!/usr/bin/env bash
# next session's issue-8 call 2: demo model from parts a + b; session 21's problems plus new ones
# (self_instruct seeds SEEDS x NSI draws); the continuations for the whole prompt set, NS engine
# shards, until GEN_END s into the call; then the data cache and the prompt files go back packed
# (xz, 15 MiB parts), so a later session can carry them in instead of generating again. Shards
# 0 .. NS/2-1 run with --gen-admit ADMIT (32), the rest with 1: their 'stopped at' counts compare.
set -u; mkdir -p /root/parts && cp .gpu2/p.ab /root/parts/
T0=$(date +%s); source .gpu/setup.sh
W=/root/w; L=/root/logs2; mkdir -p $W/data $W/si $W/prompts $L
zcat /root/parts/si21.jsonl.gz > $W/prompts/s21.jsonl; wc -l $W/prompts/s21.jsonl
NSI=${NSI:-5000}; MIX=${MIX:-competition:0.75,word:0.1,code:0.15}; SEEDS=${SEEDS:-4 5 6 7}
for s in $SEEDS; do
  python3 -m specpilot.train_drafter.self_instruct --target $M --data-dir data/evals --out $W/prompts/q$s.jsonl \
    --n $NSI --mix $MIX --seed $s --gen-batch-size 256 --work-dir $W/si --max-minutes ${SI_MIN:-1.7} \
    --device cuda > $W/si$s.log 2>&1 &
done
wait; el "self-instruct done"
for s in $SEEDS; do tr '\r' '\n' < $W/si$s.log | grep "^self-instruct" | tee $L/si$s.log; done
source docs/benchmarks/raw/demo-drafter/session22/df.sh
bash scripts/gpu_gen_shards.sh $M $(( T0 + ${GEN_END:-505} )) ${NS:-8} $L ${ADMIT:-32} -- "${DF[@]}" --gen-batch-size 256
el "generation done"
tail -4 $L/gen0.log; tail -3 $L/lines.log; wc -l $W/data/*.jsonl | tail -1; du -sh $W/data
tar cf - -C $W data prompts | xz -T16 -3 > /root/data.tar.xz; ls -la /root/data.tar.xz; sha256sum /root/data.tar.xz | tee $L/data.sha256
split -b 15M -d /root/data.tar.xz $OUT/data.part.; el "packed"
tar czf $OUT/c2logs.tgz -C $L .; ls -la $OUT
