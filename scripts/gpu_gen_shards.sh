#!/usr/bin/env bash
# Generate drafter-training data with NS engine processes on one GPU, until a wall-clock end.
#   bash scripts/gpu_gen_shards.sh MODEL END_EPOCH NS LOGDIR [ADMIT] -- <train_drafter data flags>
# Shard i runs `python -m specpilot.train_drafter --generate-only --gen-shard i/NS` with the
# given data flags (the same flags every later training call must use, so the caches match).
# ADMIT: shards 0 .. NS/2-1 run with --gen-admit ADMIT, the rest with 1, so a value is timed
# against 1 in the same call; left out, every shard runs with train_drafter's default. Writes
# LOGDIR/gen<i>.log (last lines of each shard), LOGDIR/lines.log (cache lines every 30 s) and
# LOGDIR/admit.log. DEVICE (default cuda).
set -u
M=$1; END=$2; NS=$3; L=$4; shift 4; ADMIT=
if [ "${1:-}" != "--" ]; then ADMIT=$1; shift; fi
[ "${1:-}" = "--" ] && shift
WORK=; prev=; for a in "$@"; do [ "$prev" = --work-dir ] && WORK=$a; prev=$a; done
mkdir -p "$L"; T0=$(date +%s); W=$(mktemp -d)
( while true; do sleep 30; echo "[t+$(( $(date +%s) - T0 ))s] cache lines $(cat $WORK/*.jsonl 2>/dev/null | wc -l)"; done ) > $L/lines.log 2>&1 &
LP=$!
PIDS=()
for i in $(seq 0 $((NS-1))); do
  ADM=(); [ -n "$ADMIT" ] && ADM=(--gen-admit 1) && [ $i -lt $((NS/2)) ] && ADM=(--gen-admit $ADMIT)
  echo "shard $i ${ADM[*]:-(default --gen-admit)}" >> $L/admit.log
  python3 -m specpilot.train_drafter --target $M --out $W/gen$i "$@" --generate-only \
      --gen-shard $i/$NS --gen-backend engine "${ADM[@]}" \
      --max-minutes $(python3 -c "print(max(0.1, ($END - $(date +%s)) / 60))") --device ${DEVICE:-cuda} > $W/gen$i.log 2>&1 &
  PIDS+=($!)
done
for p in "${PIDS[@]}"; do wait $p; echo "shard pid $p rc=$?"; done
kill $LP
for i in $(seq 0 $((NS-1))); do
  tr '\r' '\n' < $W/gen$i.log | grep -v "^\s*$" | grep -vE "it/s\]$|seq/s\]$" | tail -6 > $L/gen$i.log
done
rm -rf "$W"
