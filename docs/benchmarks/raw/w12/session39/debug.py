"""Where W12 `stock` (Qwen3.8-27B + DFlash2, random weights) fails: an illegal memory access
in the step graph (stock.sh, session 39). Prepared in session 39, extended in session 40 (no GPU
lent in either after that run).

1. Eager (no CUDA graphs), every W12 layer synchronised after its call and, the first time each
   (layer, rows) pair runs, checked against cuBLAS on the weight decoded by the kernels' decode
   routine (finite where torch is, within 2e-2 of the output's scale): the first failing layer is
   named with its input shape and the path and config it ran (GEMV / mma / template GEMM). The
   drafter's head top-k is checked too (ids in range, values not NaN).
2. The VERIFY and drafter-block graphs only. 3. The whole-step graph.
Stops at the first CUDA error (the context is lost then); prints every numeric mismatch (up to
20) and goes on.

    CUDA_LAUNCH_BLOCKING=1 python debug.py qwen38-27b specpilot/model_configs 4.8
    python debug.py <tiny> <folder> 4.8 cpu     # the script's own check, on CPU (W12 reference
                                                # path; "<tiny>-dflash2" beside it)
"""
import os
import re
import sys
import traceback

import torch

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from gpu_real_shapes import decode_ms_per_step  # noqa: E402
from specpilot.config import ServerArgs  # noqa: E402
from specpilot.kernels import topk as topk_module  # noqa: E402
from specpilot.offline import OfflineEngine  # noqa: E402
from specpilot.spec.simulate import simulated_acceptance  # noqa: E402
from specpilot.w12 import kernel as K  # noqa: E402
from specpilot.w12 import mma  # noqa: E402
from specpilot.w12.format import decode  # noqa: E402
from specpilot.w12.linear import W12Linear  # noqa: E402

DEVICE = sys.argv[4] if len(sys.argv) > 4 else "cuda"

orig = W12Linear.forward
orig_topk = topk_module.topk_rows
names = {}
shapes = set()
checked_pairs = set()
bad = []


def path_of(x2, p):
    """The kernel w12_matmul's fast mode takes for x2 [M, K] (kernel.w12_matmul's routing)."""
    M = x2.shape[0]
    if M > K.DECODE_THEN_MATMUL_M:
        return "decode+matmul"
    if K.MMA_MIN_M <= M <= K.MMA_MAX_M and mma.mma_supported(M, p.K):
        return f"mma {K._TUNED.get(mma._tune_key(x2, p), 'default')}"
    if M <= K.GEMV_MAX_M:
        return "gemv"
    return f"template {K._TUNED.get(K._tune_key('w12', M, p.N, p.K, x2.device), 'default')}"


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def checked(self, x):
    name = names.get(id(self), "?")
    pat = re.sub(r"\.\d+\.", ".*.", name)
    rows = x.numel() // x.shape[-1]
    shapes.add((pat, rows, self.out_features, self.in_features))
    y = orig(self, x)
    p = self.planes()
    try:
        sync()
    except Exception:
        print(f"FIRST FAILING W12 LAYER: {name} x {tuple(x.shape)} {x.dtype} stride {x.stride()} "
              f"N={p.N} K={p.K} escapes={p.kval.numel()} path {path_of(x.reshape(-1, p.K), p)}",
              flush=True)
        raise
    if (name, rows) not in checked_pairs:
        checked_pairs.add((name, rows))
        x2 = x.reshape(-1, p.K)
        w = K.decode_w12_gpu(p) if x.is_cuda else decode(self.w12_tensor())
        ref = (x2 @ w.t()).float()   # cuBLAS, fp32 accumulation
        got = y.reshape(-1, p.N).float()
        scale = ref.abs().max().item() or 1.0
        err = (got - ref).abs().max().item()
        finite_ok = bool(torch.isfinite(got)[torch.isfinite(ref)].all())
        if not finite_ok or not err <= 2e-2 * scale:
            bad.append(name)
            if len(bad) <= 20:
                print(f"MISMATCH {name} rows {rows} N={p.N} K={p.K} path "
                      f"{path_of(x2, p)}: max err {err:.3g} (scale {scale:.3g}), finite "
                      f"{finite_ok}", flush=True)
    return y


def checked_topk(x, k, *a, **kw):
    vals, ids = orig_topk(x, k, *a, **kw)
    if x.is_cuda and torch.cuda.is_current_stream_capturing():
        return vals, ids
    v = x.shape[-1]
    if not (bool((ids >= 0).all()) and bool((ids < v).all())) or bool(torch.isnan(vals).any()):
        print(f"BAD TOPK: ids in [{ids.min().item()}, {ids.max().item()}] of V={v}, NaN in the "
              f"values {bool(torch.isnan(vals).any())}, NaN logits "
              f"{int(torch.isnan(x).sum())} of {x.numel()}", flush=True)
    return vals, ids


W12Linear.forward = checked
topk_module.topk_rows = checked_topk
target = sys.argv[1]
cfg = sys.argv[2]
with simulated_acceptance(float(sys.argv[3])):
    eng = OfflineEngine(ServerArgs(
        model_path=os.path.join(cfg, target), device=DEVICE, dtype="bfloat16",
        load_format="dummy", context_length=4096, max_total_tokens=4096, max_running_requests=1,
        skip_tokenizer_init=True, cuda_graph_max_bs=1, weight_format="w12", random_seed=0,
        disable_cuda_graph=True, speculative_draft_model_path=os.path.join(cfg, target + "-dflash2"),
        speculative_draft_load_format="dummy", disable_overlap_schedule=True))
for n, m in eng.runner.model.named_modules():
    names[id(m)] = "target." + n
for n, m in eng.worker.drafter.named_modules():
    names[id(m)] = "drafter." + n
print("built", flush=True)
for stage in ("eager", "verify+draft graphs", "step graph")[:1 if DEVICE == "cpu" else 3]:
    if stage != "eager":
        W12Linear.forward = orig
        eng.worker.enable_cuda_graphs(1, step=stage == "step graph")
    try:
        # a 256-token prompt, as gpu_w12_e2e.py's: its prefill GEMMs run the template W12 GEMM
        # (M <= DECODE_THEN_MATMUL_M), the drafter's fc (K = 25600) too
        ms = decode_ms_per_step(eng.scheduler, 1, 256, 16, eng.runner.info.vocab_size)
        sync()
        print(f"{stage}: stock w12 ok, {ms}", flush=True)
    except Exception:
        print(f"{stage}: FAILED", flush=True)
        traceback.print_exc()
        break
    if stage == "eager":
        print(f"W12 calls (module, rows, N, K): {sorted(shapes)}", flush=True)
        print(f"checked {len(checked_pairs)} (layer, rows) pairs against cuBLAS: "
              f"{len(bad)} mismatched", flush=True)
        print(f"split-K counters: {[b.numel() for b in K._OUTGROWN]} outgrown, now "
              f"{[b.numel() for b in K._LOCKS.values()]}", flush=True)
