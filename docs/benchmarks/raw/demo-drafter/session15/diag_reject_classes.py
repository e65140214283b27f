# Where the run-10 drafter's chains break on held-out gsm8k (CPU fp32): the engine's walk replayed
# with the training forward (session 14 showed it equals the engine's tau), and for every token
# of the target's greedy output the drafter's row-1 accuracy, by token class.
import collections, os, sys, torch
os.environ["HF_HUB_OFFLINE"] = "1"
sys.path.insert(0, "/work/main")
from transformers import AutoTokenizer, AutoModelForCausalLM
from specpilot.train_drafter.prompts import render, eval_prompts
from specpilot.train_drafter import checkpoint
from specpilot.train_drafter.model import new_drafter, target_features, block_hidden
from specpilot.train_drafter.batching import IGNORE

M = os.path.expanduser("~/.cache/specpilot/models/SmolLM2-135M-Instruct")
D = "/work/main/specpilot/assets/smollm2-135m-dflash"
SPLIT, N, NEW = (sys.argv[1] if len(sys.argv) > 1 else "gsm8k-heldout"), 10, 128
tok = AutoTokenizer.from_pretrained(M)
tgt = AutoModelForCausalLM.from_pretrained(M, dtype=torch.float32).eval()
res = checkpoint.load_resume(D)
dr = new_drafter(res["cfg"], tgt, 1024, 0); dr.load_state_dict(res["weights"]); dr.eval()
mask, B = res["cfg"]["dflash_config"]["mask_token_id"], 16


def cls(t: int) -> str:
    s = tok.decode([t])
    if any(c.isdigit() for c in s):
        return "digits"
    if not s.strip():
        return "space/newline"
    if not any(c.isalpha() for c in s):
        return "symbol"
    return "word"


breaks, row1 = collections.Counter(), collections.defaultdict(lambda: [0, 0])
taus = []
for it in eval_prompts("/work/main/data/evals", SPLIT, N):
    p = render(tok, it["prompt"])
    with torch.no_grad():
        out = tgt.generate(torch.tensor([p]), max_new_tokens=NEW, do_sample=False)[0].tolist()
    L = len(out); anchors = torch.arange(len(p), L - 1); K = len(anchors)
    ids = torch.tensor(out); offs = torch.arange(B)
    pos = anchors[:, None] + offs[None, :]
    valid = (pos < L) & (offs[None, :] >= 1)
    labels = torch.where(valid, ids[pos.clamp(max=L - 1)], IGNORE)
    bids = torch.full((1, K, B), mask); bids[0, :, 0] = ids[anchors]
    with torch.no_grad():
        feats = target_features(tgt, ids[None], torch.ones(1, L, dtype=torch.long),
                                dr.dc.target_layer_ids)
        pred = dr.logits(block_hidden(dr, feats, bids, anchors[None])[0]).argmax(-1)  # [K, B]
    ok = (pred[:, 1:] == labels[:, 1:]) & (labels[:, 1:] != IGNORE)
    run = ok.long().cumprod(-1).sum(-1)
    for k in range(K):  # row 1 of every anchor: the next token
        c = cls(int(labels[k, 1]))
        row1[c][0] += int(ok[k, 0]); row1[c][1] += 1
    a, steps = 0, 0
    while a < K:
        n = int(run[a]); steps += 1
        j = n + 1  # first rejected row (or past the block / sequence)
        if j < B and labels[a, j] != IGNORE:
            breaks[cls(int(labels[a, j]))] += 1
        a += n + 1
    taus.append((L - len(p)) / steps)
print(f"{SPLIT}: {N} prompts, {NEW} tokens, walk tau {sum(taus) / len(taus):.3f}")
tot = sum(breaks.values())
print("chain breaks by the class of the token the drafter missed:")
for c, n in breaks.most_common():
    print(f"  {c:14} {n:5} ({n / tot:.0%})")
print("row-1 accuracy (next token) by class:")
for c, (a, n) in sorted(row1.items(), key=lambda x: -x[1][1]):
    print(f"  {c:14} {a / n:.3f} over {n} tokens")
