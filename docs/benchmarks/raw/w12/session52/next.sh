#!/usr/bin/env bash
# Session 52's device call: x resident (WsConfig.ws_xres, built this session).
# On an H100 (c2 of calls.md): test_w12_ws.py on the GPU through scripts/gpu_tests.sh, then the
# ws bench at 8 and 16 rows with x resident varied (ws_stages as the candidates', and 2: at 16
# rows K = 5120 leaves room for two stages only).
# On an H200 (the point: is its 16-row kernel held by L2's bandwidth?): the ws bench at 16 rows
# with x resident and the 32-row blocks (session 51's open question) varied in one run, so that
# the ratios are side by side; then, only where x resident wins per token on Qwen3.8-27B at 16
# rows by more than 2%, W12 `stock` on Qwen3.8-27B + DFlash2 at two requests (16 verify rows)
# with the tuner offering it ($SPECPILOT_W12_WS_XRES=1). ~7-9 min.
#   bash docs/benchmarks/raw/w12/session52/next.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L/t
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $L/gpu.txt
VARY=(--vary ws_xres=1 --vary ws_xres=1,ws_stages=2)
if grep -q H200 $L/gpu.txt; then
  VARY+=(--vary ws_rows=2,ws_ewarp=1,ws_stages=2); M=16   # (the tests passed on an H100)
else
  OUT=$L/t WORKERS=12 PER_TEST=200 LIMIT=200 bash scripts/gpu_tests.sh \
    tests/unit/test_w12_ws.py > $L/tests.log 2>&1
  el "test_w12_ws.py rc=$?"; tail -3 $L/t/gpu_tests.log
  M=8,16
fi
timeout 330 python3 scripts/gpu_w12_ws_bench.py --m $M --time-limit 280 "${VARY[@]}" \
  --out $L/xres.json > $L/xres.log 2>&1
el "ws bench rc=$?"; grep -vE "^PASS" $L/xres.log | cut -c1-200
grep -q H200 $L/gpu.txt || exit 0
python3 - $L/xres.json <<'PY' || { el "x resident: no win on Qwen3.8-27B at 16 rows, no e2e"; exit 0; }
import json, sys
rows = json.load(open(sys.argv[1]))["timing"]
for model in ("qwen38-27b", "muse-glimmer-30b"):
    for kind in ("xr", "r2"):   # per token: today's best against today's and that kind's
        t = [r for r in rows if r["model"] == model and r["M"] == 16]
        base = sum(min(r["mma"], r["ws_base"]) * r["count"] for r in t)
        new = sum(min([r["mma"], r["ws_base"]] + [v for k, v in r.items()
                  if k.startswith("ws ") and k.endswith(kind)]) * r["count"] for r in t)
        print(f"{model} 16 rows, {kind}: per-token gain {base / new:.3f}x")
        if model == "qwen38-27b" and kind == "xr":
            gain = base / new
sys.exit(0 if gain > 1.02 else 1)
PY
SPECPILOT_W12_WS_XRES=1 timeout 240 python3 scripts/gpu_w12_e2e.py --target qwen38-27b \
  --stock --drafter dflash2 --accept 4.8 --batch 2 --rounds 2 --one-engine \
  --out $L/xres_qwen.json > $L/xres_qwen.log 2>&1
el "stock qwen38-27b rc=$?"; grep -E "speedup|Error" $L/xres_qwen.log | cut -c1-300
grep -o "'mma-w12[^']*': '[^']*xr'" $L/xres_qwen.log | head -20
