set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
L=/root/logsc3; mkdir -p $L; save() { tar czf $OUT/s24c3.tgz -C $L .; }
timeout 30 python3 -m pytest -q -p no:cacheprovider -rfE tests/unit/test_topk_kernel.py > $L/gputests.log 2>&1; echo "topk tests rc=$?"; tail -1 $L/gputests.log; save
G="python3 scripts/gpu_graph_check.py --draft-graph --batch 1,8 --new 96"
timeout 100 $G --target qwen38-27b --accept 4.8 --out $L/q.json > $L/q.log 2>&1; echo "q rc=$?"
grep -E "^exactness" $L/q.log | grep -c PASS; grep -E "^exactness" $L/q.log | grep -v PASS | head -3
grep -vE "UserWarning|_warn_once|^\s*$" $L/q.log | tail -4 | cut -c1-260; save
