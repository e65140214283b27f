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
END=$(( T0 + ${GEN_END:-505} )); NS=${NS:-8}
( while true; do sleep 30; echo "[t+$(( $(date +%s) - T0 ))s] cache lines $(cat $W/data/*.jsonl 2>/dev/null | wc -l)"; done ) > $L/lines.log 2>&1 &
LP=$!
PIDS=()
for i in $(seq 0 $((NS-1))); do
  ADM=1; [ $i -lt $((NS/2)) ] && ADM=${ADMIT:-32}  # A/B: half the shards admit jobs in batches
  echo "shard $i --gen-admit $ADM" >> $L/admit.log
  python3 -m specpilot.train_drafter --target $M --out $W/gen$i "${DF[@]}" --generate-only \
      --gen-shard $i/$NS --gen-batch-size 256 --gen-backend engine --gen-admit $ADM \
      --max-minutes $(python3 -c "print(($END-$(date +%s))/60)") --device cuda > $W/gen$i.log 2>&1 &
  PIDS+=($!)
done
for p in "${PIDS[@]}"; do wait $p; echo "shard pid $p rc=$?"; done
kill $LP
el "generation done"
for i in $(seq 0 $((NS-1))); do tr '\r' '\n' < $W/gen$i.log | grep -v "^\s*$" | grep -vE "it/s\]$|seq/s\]$" | tail -6 > $L/gen$i.log; done
tail -4 $L/gen0.log; tail -3 $L/lines.log; wc -l $W/data/*.jsonl | tail -1; du -sh $W/data
tar cf - -C $W data prompts | xz -T16 -3 > /root/data.tar.xz; ls -la /root/data.tar.xz; sha256sum /root/data.tar.xz | tee $L/data.sha256
split -b 15M -d /root/data.tar.xz $OUT/data.part.; el "packed"
tar czf $OUT/c2logs.tgz -C $L .; ls -la $OUT
