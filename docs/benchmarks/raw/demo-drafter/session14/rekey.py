# re-key format-2 caches made elsewhere for this machine's target (same model, other config bytes)
import json, os, sys, torch
sys.path.insert(0, os.getcwd())
from specpilot.train_drafter.data import settings_key
src, dst, model = sys.argv[1:4]
os.makedirs(dst, exist_ok=True)
for fn in sorted(os.listdir(src)):
    if not fn.endswith(".jsonl"):
        continue
    lines = open(os.path.join(src, fn)).read().splitlines()
    head = json.loads(lines[0])
    key = settings_key(model, head["max_new_tokens"], torch.bfloat16, head["sampling"])
    head["settings"] = key
    with open(os.path.join(dst, f"data-{key}-run5.jsonl"), "w") as f:
        f.write(json.dumps(head) + "\n" + "\n".join(lines[1:]) + "\n")
    print("rekeyed", fn, "->", key, len(lines) - 1)
