#!/usr/bin/env bash
# next session, call 4: the better of A / B (mean tau gsm8k + math500) resumed exactly, alone,
# then the 10-prompt eval, the speed table and the weights back in parts. carry: .gpu .gpu3 .gpu5
set -u
source .gpu/setup.sh
W=/root/w
V=$(python3 -c "
import json
s = {}
for v in 'AB':
    try:
        r = json.load(open(f'/root/w/{v}_eval.json'))['results']
        s[v] = (r['gsm8k-heldout']['tau'] + r['math500']['tau']) / 2
    except Exception:
        s[v] = 0.0
print(max(s, key=s.get))")
el "winner: $V"
python3 -m specpilot.train_drafter --target $M --data-dir data/evals --work-dir $W/data --synthetic 20000 \
  --gsm8k-variants 20000 --samples-per-prompt 3 --temperature 0.8 --max-new-tokens 256 --max-len 512 \
  --out $W/C/drafter --state-dir $W/C/state --resume $W/$V/state --gen-fraction 0 --block-size 16 \
  --target-layer-ids 1,10,19,28 --batch-size 32 --blocks-per-seq 16 --lr ${LR:-3e-4} --warmup 100 \
  --max-minutes ${TM:-6.6} --save-every 2000 --log-every 500 --device cuda --distill kl 2>&1 \
  | tr '\r' '\n' | grep -vE "step/s\]$|it/s\]$|^\s*$" > $OUT/train_C.log; el "train done"
tail -4 $OUT/train_C.log
D=$W/C/drafter
timeout 100 python3 -m specpilot.train_drafter.evaluate --target $M --drafter $D --data-dir data/evals \
  --split gsm8k-heldout,math500,humaneval,mbpp-test --limit ${EL:-20} --max-new-tokens 256 --device cuda \
  --json $OUT/evalC10.json > $OUT/evalC10.log 2>&1; el "eval rc=$?"; tail -6 $OUT/evalC10.log
timeout 60 python3 scripts/gpu_demo_speed.py --model $M --drafter $D > $OUT/speed_C.log 2>&1; el "speed rc=$?"
tail -4 $OUT/speed_C.log
cp $D/config.json $OUT/config_C.json; cp $D/train_meta.json $OUT/train_meta_C.json
split -b 15m $D/model.safetensors $OUT/c.part.; sha256sum $D/model.safetensors; ls -la $OUT
