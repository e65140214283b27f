#!/usr/bin/env bash
# Session 53's device call: x resident in parts of K without tickets (WsConfig.ws_xres = P > 1:
# each item stores fp32 partials, sum_parts adds them in a second, PDL-chained launch).
# Both GPUs: test_w12_ws.py on the GPU (the parts in the torch sweep and the PDL graph chain,
# sum_parts against torch), then the ws bench at 16 rows with ws.xres_candidates per layer
# (--xres: whole K where it fits, else the fewest parts that fit and the fewest with four
# stages) and, on an H200, the 32-row blocks varied too, side by side. The gate prints, per
# model, the per-token gain over today's candidates of: x resident whole, in parts, both, the
# 32-row blocks (exit status: 0 where x resident, whole or parts, wins on Qwen3.8-27B at 16
# rows by more than 2% per token). 215 s on an H100 (session 55), the bench 41 s of it. Where
# it wins on an H200, the next call: W12 `stock` on Qwen3.8-27B + DFlash2 at two requests with
# it offered (the command at the end).
#   [TL=270] [MODELS=qwen38-27b,muse-glimmer-30b] [TESTS=0 [CHECK=0]] bash docs/benchmarks/raw/w12/session53/next.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L/t
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $L/gpu.txt
TRC=1
if [ "${TESTS:-1}" = 1 ]; then   # TESTS=0: the bench alone (its checks compare every config)
  OUT=$L/t WORKERS=12 PER_TEST=150 LIMIT=170 bash scripts/gpu_tests.sh \
    tests/unit/test_w12_ws.py > $L/tests.log 2>&1
  TRC=$?; el "test_w12_ws.py rc=$TRC"; tail -3 $L/t/gpu_tests.log
fi
VARY=(--xres)   # the bench's checks compile every config (not done after 160 s on a fresh
# H100, session 54) and count against TL: skipped where test_w12_ws.py passed (it checks them
# too); CHECK=0 with TESTS=0: timing alone (where test_w12_ws.py passed on another sm_90 GPU
# at this tree, e.g. session 55's H100, and the device time left is short)
{ [ $TRC = 0 ] || [ "${CHECK:-1}" = 0 ]; } && VARY+=(--skip-check)
grep -q H200 $L/gpu.txt && VARY+=(--vary ws_rows=2,ws_ewarp=1,ws_stages=2)
timeout $(( ${TL:-270} + 50 )) python3 scripts/gpu_w12_ws_bench.py --m 16 --time-limit ${TL:-270} \
  --models ${MODELS:-qwen38-27b,muse-glimmer-30b} "${VARY[@]}" \
  --out $L/xres.json > $L/xres.log 2>&1
el "ws bench rc=$?"; grep -vE "^PASS" $L/xres.log | cut -c1-200
python3 - $L/xres.json <<'PY' > $L/gate.txt; rc=$?; cat $L/gate.txt; el "gate rc=$rc"
import json, re, sys
rows = json.load(open(sys.argv[1]))["timing"]
KINDS = {"xr whole": lambda s: s.endswith("xr"), "xr parts": lambda s: re.search(r"xr\d+$", s),
         "xr any": lambda s: re.search(r"xr\d*$", s), "r2": lambda s: re.search(r"(?<!x)r2$", s)}
gain = 0
for model in ("qwen38-27b", "muse-glimmer-30b"):
    t = [r for r in rows if r["model"] == model and r["M"] == 16]
    if not t:
        continue
    base = sum(min(r["mma"], r["ws_base"]) * r["count"] for r in t)
    for r in t:   # per layer: today's best, the best x resident / 32-row config (us a call)
        best = {n: min([(v, k[3:]) for k, v in r.items() if k.startswith("ws ") and f(k[3:])]
                       or [(float("nan"), "-")]) for n, f in KINDS.items() if n != "xr any"}
        print(f"{model} {r['layer'][:20]:20s} cuBLAS {r['cublas']:7.1f} today "
              f"{min(r['mma'], r['ws_base']):7.1f} " + " ".join(
                  f"{n} {v:7.1f} ({c})" for n, (v, c) in best.items()))
    for kind, f in KINDS.items():   # per token: today's best against today's and that kind's
        new = sum(min([r["mma"], r["ws_base"]] + [v for k, v in r.items()
                  if k.startswith("ws ") and f(k[3:])]) * r["count"] for r in t)
        print(f"{model} 16 rows, {kind}: per-token gain {base / new:.3f}x "
              f"({sum(r['cublas'] * r['count'] for r in t) / new:.3f}x of cuBLAS)")
        if model == "qwen38-27b" and kind == "xr any":
            gain = base / new
sys.exit(0 if gain > 1.02 else 1)
PY
# (W12 `stock` with x resident offered, where the gate passes on an H200; =1 offers whole K
#  only, =parts the parts too (where they won):
#  SPECPILOT_W12_WS_XRES=1 python3 scripts/gpu_w12_e2e.py --target qwen38-27b --stock
#  --drafter dflash2 --accept 4.8 --batch 2 --rounds 2 --one-engine: a call of its own)
exit 0
