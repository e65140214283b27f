#!/usr/bin/env bash
# session 19 call 2: demo model from parts a (call 1) + b; training data regenerated with our engine, 8 shards;
# then the overlap check on Muse-Glimmer-30B while time is left
set -u; mkdir -p /root/parts && cp .gpu2/p.ab /root/parts/
T0=$(date +%s); source .gpu/setup.sh
W=/root/w; mkdir -p $W/data
DF=(--data-dir data/evals --work-dir $W/data --synthetic 20000 --gsm8k-variants 20000
    --samples-per-prompt 3 --temperature 0.8 --max-new-tokens 256 --max-len 512)
END=$(( T0 + ${GEN_END:-400} )); NS=${NS:-8}
( while true; do sleep 30; echo "[t+$(( $(date +%s) - T0 ))s] cache lines $(cat $W/data/*.jsonl 2>/dev/null | wc -l)"; done ) > $OUT/lines.log 2>&1 &
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
for i in $(seq 0 $((NS-1))); do tr '\r' '\n' < $W/gen$i.log | grep -v "^\s*$" | grep -vE "it/s\]$|seq/s\]$" | tail -6 > $OUT/gen$i.log; done
tail -3 $OUT/gen0.log; tail -3 $OUT/lines.log; wc -l $W/data/*.jsonl | tail -1; du -sh $W/data
LEFT=$(( T0 + 570 - $(date +%s) ))
if [ $LEFT -gt 120 ]; then
timeout $LEFT python3 scripts/gpu_graph_check.py --target muse-glimmer-30b --accept 6.5 --draft-graph --batch 1,8 \
  --skip-exactness --out $OUT/gc_muse.json > $OUT/gc_muse.log 2>&1; el "graph check muse rc=$?"
grep -vE "UserWarning|_warn_once|^\s*$" $OUT/gc_muse.log | tail -25 | cut -c1-220
fi
