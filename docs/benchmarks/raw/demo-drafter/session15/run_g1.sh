#!/usr/bin/env bash
# session 15 call 3: demo model; caches of runs 5-7; data generation with our engine, 4 shards
set -u
source .gpu/setup.sh
W=/root/w; mkdir -p $W/data
python3 .gpu/rekey.py .gpu6 $W/data $M
tar xzf .gpu8/data.tgz -C $W/data
ls $W/data > $W/data_before.txt; wc -l $W/data/*.jsonl | tail -1
DF=(--data-dir data/evals --work-dir $W/data --synthetic ${SY:-20000} --gsm8k-variants ${VAR:-20000}
    --samples-per-prompt 3 --temperature 0.8 --max-new-tokens 256 --max-len 512)
END=$(( T0 + ${GEN_END:-520} ))
( while true; do sleep 30; echo "[t+$(( $(date +%s) - T0 ))s] cache lines $(cat $W/data/*.jsonl | wc -l)"; done ) > $OUT/lines.log 2>&1 &
LP=$!
PIDS=()
for i in 0 1 2 3; do
  ( python3 -m specpilot.train_drafter --target $M --out $W/gen$i "${DF[@]}" --generate-only \
      --gen-shard $i/4 --gen-batch-size ${GB:-256} --gen-backend engine \
      --max-minutes $(python3 -c "print(($END-$(date +%s))/60)") --device cuda > $W/gen$i.log 2>&1
    rc=$?; echo "engine shard $i rc=$rc" >> $W/gen$i.log
    left=$(( END - $(date +%s) ))
    if [ $rc -ne 0 ] && [ $left -gt 60 ]; then
      python3 -m specpilot.train_drafter --target $M --out $W/gen$i "${DF[@]}" --generate-only \
        --gen-shard $i/4 --gen-batch-size 512 --gen-backend hf --max-minutes $(python3 -c "print($left/60)") \
        --device cuda >> $W/gen$i.log 2>&1; echo "hf fallback shard $i rc=$?" >> $W/gen$i.log
    fi ) &
  PIDS+=($!)
done
wait "${PIDS[@]}"
sleep 1; kill $LP
el "generation done"
for i in 0 1 2 3; do tr '\r' '\n' < $W/gen$i.log | grep -v "^\s*$" | grep -vE "it/s\]$" | tail -25 > $OUT/gen$i.log; done
tail -3 $OUT/gen0.log; cat $OUT/lines.log | tail -4
new=$(comm -13 $W/data_before.txt <(ls $W/data)); echo "new caches: $new"
(cd $W/data && wc -l $new >&2 && tar czf - $new) | split -b 15m - $OUT/data.tgz.part.
ls -la $OUT; el done
