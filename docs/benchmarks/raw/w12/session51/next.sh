#!/usr/bin/env bash
# Session 51's device call (meant for an H200; on another GPU it stops at once): the 32-row
# blocks (ws_rows 2) at 16 rows against the final candidate set (session 50's h200 mode at 16
# rows only: at 8 rows x costs L2 1.67 bytes per weight byte already, and the H100 lost 4-19%
# per layer there); then, only where they win per token on Muse-Glimmer-30B at 16 rows by more
# than 2%, W12 `stock` on Muse-Glimmer-30B + DFlash2 at one request (16 verify rows) with the
# tuner offering them ($SPECPILOT_W12_WS_ROWS2=1), in the same call (~8 min at most). Qwen3.8-27B
# verifies 16 rows at two requests: session49/next.sh rows2-e2e.
#   bash docs/benchmarks/raw/w12/session51/next.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
L=$OUT/next; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee $L/gpu.txt
grep -q H200 $L/gpu.txt || { echo "not an H200: stopped"; exit 3; }
timeout 260 python3 scripts/gpu_w12_ws_bench.py --m 16 --time-limit 200 \
  --vary ws_rows=2,ws_ewarp=1 --vary ws_rows=2,ws_ewarp=1,ws_stages=2 \
  --out $L/rows2.json > $L/rows2.log 2>&1
el "ws bench rc=$?"; grep -vE "^PASS" $L/rows2.log | cut -c1-200
python3 - $L/rows2.json <<'PY' || { el "32-row blocks: no win on Muse-Glimmer-30B at 16 rows, no e2e"; exit 0; }
import json, sys
t = [r for r in json.load(open(sys.argv[1]))["totals"]
     if r["model"] == "muse-glimmer-30b" and r["M"] == 16 and "best_base" in r]
gain = max((r["best_base"] / r["best"] for r in t), default=0.0)
print(f"32-row blocks, Muse-Glimmer-30B at 16 rows: per-token gain {gain:.3f}x")
sys.exit(0 if gain > 1.02 else 1)
PY
SPECPILOT_W12_WS_ROWS2=1 timeout 240 python3 scripts/gpu_w12_e2e.py --target muse-glimmer-30b \
  --stock --drafter dflash2 --accept 6.5 --batch 1 --rounds 2 --one-engine \
  --out $L/rows2_muse.json > $L/rows2_muse.log 2>&1
el "stock muse-glimmer-30b rc=$?"; grep -E "speedup|Error" $L/rows2_muse.log | cut -c1-300
grep -o "'mma-w12[^']*': '[^']*r2'" $L/rows2_muse.log | head -20
