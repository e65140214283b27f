"""Session 39: where W12 `stock` (Qwen3.8-27B + DFlash2, random weights) reads out of bounds
(an illegal memory access in the step graph, stock.sh). 1. Eager (no CUDA graphs), every W12
layer synchronised after its call: the first failing layer is named with its input shape.
2. The VERIFY and drafter-block graphs only. 3. The whole-step graph. Stops at the first
failure (the CUDA context is lost then)."""
import os
import re
import sys
import traceback

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from gpu_real_shapes import decode_ms_per_step  # noqa: E402
from specpilot.config import ServerArgs  # noqa: E402
from specpilot.offline import OfflineEngine  # noqa: E402
from specpilot.spec.simulate import simulated_acceptance  # noqa: E402
from specpilot.w12.linear import W12Linear  # noqa: E402

orig = W12Linear.forward
names = {}


shapes = set()


def checked(self, x):
    name = re.sub(r"\.\d+\.", ".*.", names.get(id(self), "?"))
    shapes.add((name, x.numel() // x.shape[-1], self.out_features, self.in_features))
    y = orig(self, x)
    try:
        torch.cuda.synchronize()
    except Exception:
        p = self.planes
        print(f"FIRST FAILING W12 LAYER: {names.get(id(self))} x {tuple(x.shape)} {x.dtype} "
              f"stride {x.stride()} N={p.N} K={p.K} escapes={p.kval.numel()}", flush=True)
        raise
    return y


W12Linear.forward = checked
target = sys.argv[1]
cfg = sys.argv[2]
with simulated_acceptance(float(sys.argv[3])):
    eng = OfflineEngine(ServerArgs(
        model_path=os.path.join(cfg, target), device="cuda", dtype="bfloat16",
        load_format="dummy", context_length=4096, max_total_tokens=4096, max_running_requests=1,
        skip_tokenizer_init=True, cuda_graph_max_bs=1, weight_format="w12", random_seed=0,
        disable_cuda_graph=True, speculative_draft_model_path=os.path.join(cfg, target + "-dflash2"),
        speculative_draft_load_format="dummy", disable_overlap_schedule=True))
for n, m in eng.runner.model.named_modules():
    names[id(m)] = "target." + n
for n, m in eng.worker.drafter.named_modules():
    names[id(m)] = "drafter." + n
print("built", flush=True)
for stage in ("eager", "verify+draft graphs", "step graph"):
    if stage != "eager":
        W12Linear.forward = orig
        eng.worker.enable_cuda_graphs(1, step=stage == "step graph")
    try:
        # a 256-token prompt, as gpu_w12_e2e.py's: its prefill GEMMs run the template W12 GEMM
        # (M <= DECODE_THEN_MATMUL_M), the drafter's fc (K = 25600) too
        ms = decode_ms_per_step(eng.scheduler, 1, 256, 16, eng.runner.info.vocab_size)
        torch.cuda.synchronize()
        print(f"{stage}: stock w12 ok, {ms}", flush=True)
    except Exception:
        print(f"{stage}: FAILED", flush=True)
        traceback.print_exc()
        break
    if stage == "eager":
        print("W12 calls (module, rows, N, K):", sorted(shapes), flush=True)
