"""Seeded exponential noise for B rows x V ids: the per-row-generator version (before session 16)
against sampler.seeded_exponential_ as of session 17 (after: keys hashed in python ints, then on
CUDA one Triton launch writing the rows in place; on CPU the torch ops of session 16). Median
wall and the number of aten ops dispatched (on a GPU each op on a device tensor is a kernel
launch; the Triton launch is not an aten op, so "after ops" on CUDA counts the rest: the empty
+ exponential_ of the unseeded noise, and the one host->device copy).
    PYTHONPATH=. python docs/benchmarks/raw/demo-drafter/session17/noise_bench.py [cpu|cuda]"""
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from specpilot.engine.sampler import _mix, seeded_exponential_
from specpilot.layers.norm import triton_kernels

DEV = sys.argv[1] if len(sys.argv) > 1 else "cpu"


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def before(keys, V):
    noise = torch.empty(len(keys), V, device=DEV).exponential_()
    for i, k in enumerate(keys):
        g = torch.Generator(device=DEV)
        g.manual_seed(k)
        noise[i] = torch.empty(V, device=DEV).exponential_(generator=g)
    return noise


def after(keys, V):
    noise = torch.empty(len(keys), V, device=DEV).exponential_()
    return seeded_exponential_(noise, list(range(len(keys))), keys)


V = 49152
torch.set_grad_enabled(False)  # as in the engine (inference_mode): with autograd on, no Triton path
path = "triton" if triton_kernels(torch.empty(1, device=DEV), "noise") is not None else "torch"
print(f"device {DEV}, V {V}, after = {path} path")
print("B     before ms  after ms  before ops  after ops")
for B in (1, 8, 64, 256):
    keys = [_mix(s, 3) for s in range(B)]
    row = [B]
    for f in (before, after):
        f(keys, V)
        ts = []
        for _ in range(5):
            sync()
            t = time.perf_counter()
            f(keys, V)
            sync()
            ts.append((time.perf_counter() - t) * 1e3)
        row.append(statistics.median(ts))
    for f in (before, after):
        with profile(activities=[ProfilerActivity.CPU]) as p:
            f(keys, V)
        row.append(sum(1 for e in p.events() if e.name.startswith("aten::") and e.cpu_parent is None))
    print("%-5d %9.2f %9.2f %11d %10d" % tuple(row))
