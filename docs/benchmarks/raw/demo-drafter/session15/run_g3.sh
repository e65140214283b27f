#!/usr/bin/env bash
# session 15 call 5: the better of A / B (mean tau on gsm8k + math500): 10-prompt eval, H200 speed
set -u
source .gpu/setup.sh
W=/root/w
V=$(python3 - <<'PY'
import json
s = {}
for v in "AB":
    try:
        r = json.load(open(f"/root/w/{v}_eval.json"))["results"]
        s[v] = (r["gsm8k-heldout"]["tau"] + r["math500"]["tau"]) / 2
    except Exception as e:
        s[v] = 0.0
print(max(s, key=s.get))
PY
)
el "winner: $V"; D=$W/$V/drafter; ls -la $D
timeout 200 python3 -m specpilot.train_drafter.evaluate --target $M --drafter $D --data-dir data/evals \
  --split gsm8k-heldout,math500,humaneval,mbpp-test --limit 10 --max-new-tokens 256 --device cuda \
  --json $OUT/eval10.json > $OUT/eval10.log 2>&1; el "eval rc=$?"; tail -6 $OUT/eval10.log
timeout 200 python3 scripts/gpu_demo_speed.py --model $M --drafter $D > $OUT/speed_new.log 2>&1; el "speed rc=$?"
tail -8 $OUT/speed_new.log
cp $D/config.json $D/train_meta.json $OUT/; split -b 15m $D/model.safetensors $OUT/m.part.
sha256sum $D/model.safetensors; ls -la $OUT
