# session 14: why does W12-reproducible differ from the swapped bf16 Triton GEMM on the demo model?
# each engine twice (run-to-run determinism), and a call count per swapped / converted layer.
import os, sys, gc, torch
os.environ["SPECPILOT_W12_AUTOTUNE"] = "0"
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from gpu_w12_e2e import demo_prompts, swap_linears
from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from specpilot.w12.linear import convert_model_linears
M = sys.argv[1]
prompts = demo_prompts(M, 16)
sp = SamplingParams(temperature=0, max_new_tokens=64, ignore_eos=True)
common = dict(model_path=M, device="cuda", dtype="bfloat16", max_total_tokens=16384,
              max_running_requests=16, disable_cuda_graph=True)
def run(kind):
    eng = OfflineEngine(ServerArgs(**common))
    model = eng.runner.model
    names = None
    if kind == "w12":
        rep = convert_model_linears(model, reproducible=True)
        names = {n for n, t in rep["layers"].items() if t.startswith("w12")}
    elif kind == "triton":
        rep = convert_model_linears(OfflineEngine(ServerArgs(**common)).runner.model, reproducible=True)
        names = {n for n, t in rep["layers"].items() if t.startswith("w12")}
        swap_linears(model, names)
    calls = {}
    if names:
        for n, mod in model.named_modules():
            if n in names:
                mod.register_forward_hook(lambda m, i, o, n=n: calls.__setitem__(n, calls.get(n, 0) + 1))
    outs = [o.output_ids for o in eng.generate(prompts, sp)]
    never = sorted(n for n in (names or ()) if n not in calls)
    del eng; gc.collect(); torch.cuda.empty_cache()
    return outs, never, (min(calls.values()) if calls else 0, max(calls.values()) if calls else 0)
res = {}
for kind in ("auto", "auto", "triton", "triton", "w12", "w12"):
    outs, never, cr = run(kind)
    res.setdefault(kind, []).append(outs)
    print(kind, "layers never called:", len(never), never[:4], "calls min/max", cr, flush=True)
same = lambda a, b: sum(x == y for x, y in zip(a, b))
for kind, (a, b) in res.items():
    print(f"{kind} run1 == run2: {same(a, b)}/16")
print(f"triton == w12: {same(res['triton'][0], res['w12'][0])}/16 ; triton == auto: {same(res['triton'][0], res['auto'][0])}/16")
