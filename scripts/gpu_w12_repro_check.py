"""W12 reproducible mode against our bf16 Triton GEMM on the GPU: bit for bit, kernels and model.

    PYTHONPATH=. python scripts/gpu_w12_repro_check.py [--demo-model DIR] [--out FILE.json]

1. Kernels (random weights at the demo model's linear shapes, 0.1% of the values scaled out of
   the exponent window so every tile has escapes, per-tensor and per-row bases; M from decode
   to prefill sizes): ``decode_w12_gpu`` bitwise equal to the weights; ``w12_matmul(...,
   reproducible=True)`` bitwise equal to ``bf16_matmul`` on the same weights, both at their
   default configs (autotuning off); each of the two deterministic from one call to the next.
2. Demo model (``--demo-model``, real SmolLM2 weights, bf16, greedy, eager so that the layers
   below really run): 16 held-out gsm8k prompts x 64 tokens through `ar` with
   - ``auto``: the model's own layers (cuBLAS),
   - ``triton``: every layer that W12 converts replaced by our bf16 Triton GEMM,
   - ``w12``: those layers converted to W12, reproducible mode,
   each engine twice (run-to-run determinism) and with a forward-call count per swapped layer
   (a layer the model bypasses would make the check meaningless). ``triton`` and ``w12`` must be
   identical; ``auto`` may differ from both by fp32 summation order (cuBLAS).
Configs tuned earlier in the process would be used by one side only, so the tuning cache is
cleared and autotuning switched off first (``SPECPILOT_W12_AUTOTUNE=0``).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

SHAPES = [(576, 576), (192, 576), (1536, 576), (576, 1536), (960, 576), (3072, 576)]
MS = (1, 3, 16, 17, 40, 64, 65, 200, 1000, 2600)


class TritonBF16Linear(torch.nn.Module):
    """An nn.Linear's weight and bias through our bf16 Triton GEMM (the W12 kernels' template)."""

    def __init__(self, lin: torch.nn.Linear):
        super().__init__()
        self.weight, self.bias = lin.weight, lin.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from specpilot.w12.kernel import bf16_matmul

        y = bf16_matmul(x.reshape(-1, x.shape[-1]), self.weight)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], y.shape[-1])


def swap_linears(model: torch.nn.Module, names: set) -> int:
    """Replace the nn.Linear children named in ``names`` by TritonBF16Linear; returns how many."""
    n = 0
    for mname, module in model.named_modules():
        for cname, child in list(module.named_children()):
            full = f"{mname}.{cname}" if mname else cname
            if full in names and isinstance(child, torch.nn.Linear):
                setattr(module, cname, TritonBF16Linear(child))
                n += 1
    return n


def _defaults_only():
    from specpilot.w12 import kernel

    os.environ["SPECPILOT_W12_AUTOTUNE"] = "0"
    kernel.clear_tuning()


def kernels_check(device="cuda") -> dict:
    from specpilot.w12 import kernel as k
    from specpilot.w12.format import bitwise_equal, encode

    _defaults_only()
    torch.manual_seed(0)
    rows = []
    for n, kk in SHAPES:
        w = torch.randn(n, kk, device=device) * 0.02
        w[torch.rand(n, kk, device=device) < 1e-3] *= 3000.0  # out of the window: escapes
        w = w.to(torch.bfloat16)
        for per_row in (False, True):
            t = encode(w, per_row=per_row)
            p = k.prepare(t, device)
            dec_ok = bitwise_equal(k.decode_w12_gpu(p), w)
            for m in MS:
                x = torch.randn(m, kk, device=device).to(torch.bfloat16)
                cfg = k.default_config(m, n, kk, k._num_sms(x.device))
                a, a2 = (k.w12_matmul(x, p, reproducible=True) for _ in range(2))
                b, b2 = (k.bf16_matmul(x, w) for _ in range(2))
                r = dict(N=n, K=kk, per_row=per_row, escapes=int(t.esc.numel()),
                         decode_exact=dec_ok, M=m, config=str(cfg), repro_eq_bf16=torch.equal(a, b),
                         deterministic=torch.equal(a, a2) and torch.equal(b, b2))
                rows.append(r)
                print(f"N{n:5d} K{kk:5d} per_row={int(per_row)} esc={r['escapes']:4d} "
                      f"decode={int(dec_ok)} M{m:5d} bm{cfg.block_m} bk{cfg.block_k} "
                      f"split{cfg.split_k}: repro==bf16 {int(r['repro_eq_bf16'])} "
                      f"deterministic {int(r['deterministic'])}", flush=True)
    ok = sum(r["decode_exact"] and r["repro_eq_bf16"] and r["deterministic"] for r in rows)
    print(f"kernels: {ok}/{len(rows)} ok (decode exact, reproducible == bf16, deterministic)")
    return dict(ok=ok, total=len(rows), rows=rows)


def demo_check(model_dir: str, n_prompts: int = 16, new: int = 64, device="cuda") -> dict:
    from gpu_w12_e2e import demo_prompts

    from specpilot.config import ServerArgs
    from specpilot.core import SamplingParams
    from specpilot.offline import OfflineEngine
    from specpilot.w12.linear import convert_model_linears

    _defaults_only()
    prompts = demo_prompts(model_dir, n_prompts)
    sp = SamplingParams(temperature=0, max_new_tokens=new, ignore_eos=True)
    common = dict(model_path=model_dir, device=device, dtype="bfloat16", max_total_tokens=16384,
                  max_running_requests=len(prompts), disable_cuda_graph=True)
    names = None

    def run(kind):
        nonlocal names
        eng = OfflineEngine(ServerArgs(**common))
        model = eng.runner.model
        if kind == "w12":
            rep = convert_model_linears(model, reproducible=True)
            names = {n for n, t in rep["layers"].items() if t.startswith("w12")}
        elif kind == "triton":
            swap_linears(model, names)
        calls = {}
        for n, mod in model.named_modules():
            if names and n in names:
                mod.register_forward_hook(
                    lambda m, i, o, n=n: calls.__setitem__(n, calls.get(n, 0) + 1))
        outs = [o.output_ids for o in eng.generate(prompts, sp)]
        never = sorted(n for n in (names or ()) if n not in calls) if kind != "auto" else []
        del eng
        gc.collect()
        torch.cuda.empty_cache()
        return outs, never

    res = {}
    for kind in ("w12", "w12", "triton", "triton", "auto", "auto"):  # w12 first: it names layers
        outs, never = run(kind)
        res.setdefault(kind, []).append(outs)
        if never:
            print(f"{kind}: {len(never)} swapped layers never called, e.g. {never[:3]}")
    same = lambda a, b: sum(x == y for x, y in zip(a, b))  # noqa: E731
    out = {"prompts": len(prompts), "new_tokens": new, "layers": len(names),
           **{f"{k}_run_to_run": same(*v) for k, v in res.items()},
           "w12_eq_triton": same(res["w12"][0], res["triton"][0]),
           "triton_eq_auto": same(res["triton"][0], res["auto"][0])}
    print(f"demo, {len(names)} layers: w12 reproducible == triton bf16 on "
          f"{out['w12_eq_triton']}/{len(prompts)} prompts; run to run: w12 "
          f"{out['w12_run_to_run']}, triton {out['triton_run_to_run']}, auto "
          f"{out['auto_run_to_run']}; triton == auto (cuBLAS) {out['triton_eq_auto']}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--demo-model", default=None)
    ap.add_argument("--skip-kernels", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 2
    res = {}
    if not a.skip_kernels:
        res["kernels"] = kernels_check()
    if a.demo_model:
        res["demo"] = demo_check(a.demo_model)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    bad = (res.get("kernels", {}).get("ok") != res.get("kernels", {}).get("total")
           or res.get("demo", {}).get("w12_eq_triton", 0) != res.get("demo", {}).get("prompts", 0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
