#!/usr/bin/env bash
# session 21 call 2: demo model from parts a (call 1) + b; the target writes new problems
# (self_instruct, 4 seeds x NSI draws, competition-heavy mix; seeds 0-3 with more draws give
# session 20's problems and new ones), then the training data for the old prompt set plus those
# problems, NS engine shards, within the call. Logs come back as one tarball.
set -u; mkdir -p /root/parts && cp .gpu2/p.ab /root/parts/
T0=$(date +%s); source .gpu/setup.sh
W=/root/w; L=/root/logs2; mkdir -p $W/data $W/si $L
NSI=${NSI:-10000}; MIX=${MIX:-competition:0.75,word:0.1,code:0.15}
for s in 0 1 2 3; do
  python3 -m specpilot.train_drafter.self_instruct --target $M --data-dir data/evals --out $W/si/q$s.jsonl \
    --n $NSI --mix $MIX --seed $s --gen-batch-size 256 --work-dir $W/si --max-minutes ${SI_MIN:-3.3} \
    --device cuda > $W/si$s.log 2>&1 &
done
wait; el "self-instruct done"
for s in 0 1 2 3; do tr '\r' '\n' < $W/si$s.log | grep "^self-instruct" | tee $L/si$s.log; done
cat $W/si/q?.jsonl | gzip > $OUT/self_instruct.jsonl.gz; cat $W/si/q?.jsonl | wc -l
DF=(--data-dir data/evals --work-dir $W/data --synthetic 20000 --gsm8k-variants 20000
    --samples-per-prompt 3 --temperature 0.8 --max-new-tokens 256 --max-len 512)
for s in 0 1 2 3; do DF+=(--prompts-file $W/si/q$s.jsonl); done
END=$(( T0 + ${GEN_END:-565} )); NS=${NS:-8}
( while true; do sleep 30; echo "[t+$(( $(date +%s) - T0 ))s] cache lines $(cat $W/data/*.jsonl 2>/dev/null | wc -l)"; done ) > $L/lines.log 2>&1 &
LP=$!
PIDS=()
for i in $(seq 0 $((NS-1))); do
  python3 -m specpilot.train_drafter --target $M --out $W/gen$i "${DF[@]}" --generate-only \
      --gen-shard $i/$NS --gen-batch-size 256 --gen-backend engine \
      --max-minutes $(python3 -c "print(($END-$(date +%s))/60)") --device cuda > $W/gen$i.log 2>&1 &
  PIDS+=($!)
done
for p in "${PIDS[@]}"; do wait $p; echo "shard pid $p rc=$?"; done
kill $LP
el "generation done"
for i in $(seq 0 $((NS-1))); do tr '\r' '\n' < $W/gen$i.log | grep -v "^\s*$" | grep -vE "it/s\]$|seq/s\]$" | tail -6 > $L/gen$i.log; done
tail -4 $L/gen0.log; tail -3 $L/lines.log; wc -l $W/data/*.jsonl | tail -1; du -sh $W/data
tar czf $OUT/c2logs.tgz -C $L .; ls -la $OUT
