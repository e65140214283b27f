import os, sys, torch
os.environ["HF_HUB_OFFLINE"]="1"
sys.path.insert(0, "/work/main")
from transformers import AutoTokenizer, AutoModelForCausalLM
from specpilot.train_drafter.prompts import _gsm8k, render, eval_prompts
from specpilot.train_drafter import checkpoint
from specpilot.train_drafter.model import new_drafter, forward_loss
from specpilot.train_drafter.batching import Batch, IGNORE
M=os.path.expanduser("~/.cache/specpilot/models/SmolLM2-135M-Instruct")
D="/work/main/specpilot/assets/smollm2-135m-dflash"
tok=AutoTokenizer.from_pretrained(M)
tgt=AutoModelForCausalLM.from_pretrained(M, dtype=torch.float32).eval()
res=checkpoint.load_resume(D)
dr=new_drafter(res["cfg"], tgt, 1024, 0); dr.load_state_dict(res["weights"]); dr.eval()
mask=res["cfg"]["dflash_config"]["mask_token_id"]; B=16
tr=[render(tok,it["prompt"]) for it in _gsm8k("/work/main/data/evals", False)[0][:6]]
ho=[render(tok,it["prompt"]) for it in eval_prompts("/work/main/data/evals","gsm8k-heldout",6)]
for name, ps in (("train", tr), ("heldout", ho)):
    runs=[]
    for p in ps:
        with torch.no_grad():
            out=tgt.generate(torch.tensor([p]), max_new_tokens=128, do_sample=False)[0].tolist()
        L=len(out); anchors=torch.arange(len(p), L-1)
        K=len(anchors); offs=torch.arange(B)
        ids=torch.tensor(out)
        pos=anchors[:,None]+offs[None,:]
        valid=(pos<L)&(offs[None,:]>=1)
        labels=torch.where(valid, ids[pos.clamp(max=L-1)], IGNORE)[None]
        bids=torch.full((1,K,B),mask); bids[0,:,0]=ids[anchors]
        b=Batch(ids[None], torch.ones(1,L,dtype=torch.long), anchors[None], bids, labels)
        from specpilot.train_drafter.model import target_features, block_hidden
        with torch.no_grad():
            feats=target_features(tgt,b.input_ids,b.attention_mask,dr.dc.target_layer_ids)
            h=block_hidden(dr,feats,b.block_ids,b.anchors)
            pred=dr.logits(h[0]).argmax(-1)  # [K,B]
        lab=labels[0]
        ok=(pred[:,1:]==lab[:,1:])&(lab[:,1:]!=IGNORE)
        run=ok.long().cumprod(-1).sum(-1)
        a=0; steps=0
        while a < K:
            n=int(run[a]); steps+=1; a+=n+1
        runs.append((1+run.float().mean().item(), (L-len(p))/steps))
    print(name, "uniform", round(sum(r[0] for r in runs)/len(runs),3), "walk", round(sum(r[1] for r in runs)/len(runs),3), [round(r[1],2) for r in runs], flush=True)
