#!/usr/bin/env bash
# next session's issue-8 call 4: call 3's drafter scored on the whole gsm8k half and math500 (H200,
# bf16), then its speed with CUDA graphs; logs as one tarball.  env: V
set -u
T0=$(date +%s); source .gpu/setup.sh
W=/root/w; V=${V:-Q}; L=/root/logs4; mkdir -p $L; D=$W/$V/drafter
for sp in gsm8k-heldout math500; do
  timeout 240 python3 -m specpilot.train_drafter.evaluate --target $M --drafter $D --data-dir data/evals \
    --split $sp --limit 660 --max-new-tokens 256 --device cuda --json $L/eval_${V}_$sp.json > $L/eval_${V}_$sp.log 2>&1 &
done
wait; el "evals done"; for sp in gsm8k-heldout math500; do tail -3 $L/eval_${V}_$sp.log; done
timeout 90 python3 scripts/gpu_demo_speed.py --model $M --drafter $D > $L/speed_$V.log 2>&1; el "speed rc=$?"
tail -4 $L/speed_$V.log
tar czf $OUT/c4logs.tgz -C $L .; ls -la $OUT; el done
