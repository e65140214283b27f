import os, sys, json
os.environ["HF_HUB_OFFLINE"]="1"
sys.path.insert(0, "/work/main")
from transformers import AutoTokenizer
from specpilot.config import ServerArgs
from specpilot.offline import OfflineEngine
from specpilot.train_drafter.prompts import _gsm8k, render, eval_prompts
from specpilot.train_drafter.evaluate import measure
M=os.path.expanduser("~/.cache/specpilot/models/SmolLM2-135M-Instruct")
D="/work/main/specpilot/assets/smollm2-135m-dflash"
tok=AutoTokenizer.from_pretrained(M)
tr=[render(tok,it["prompt"]) for it in _gsm8k("/work/main/data/evals", False)[0][:6]]
ho=[render(tok,it["prompt"]) for it in eval_prompts("/work/main/data/evals","gsm8k-heldout",6)]
common=dict(model_path=M, device="cpu", dtype="float32", max_total_tokens=6*(600)+1024)
ar=OfflineEngine(ServerArgs(**common))
st=OfflineEngine(ServerArgs(**common, speculative_draft_model_path=D, speculative_num_draft_tokens=16))
for name, ps in (("train", tr), ("heldout", ho)):
    r=measure(ar, st, ps, 128)
    print(name, round(r["tau"],3), [round(x,2) for x in r["per_prompt_tau"]], flush=True)
