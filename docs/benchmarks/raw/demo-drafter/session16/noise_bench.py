"""Seeded exponential noise for B rows x V: the per-row-generator version (before) against
seeded_uniform (after), CPU: wall and number of aten ops dispatched (each is a kernel launch on a GPU)."""
import time, torch, statistics, sys
from torch.profiler import profile, ProfilerActivity
from specpilot.engine.sampler import seeded_uniform, _mix

def before(keys, V):
    noise = torch.empty(len(keys), V).exponential_()
    for i, k in enumerate(keys):
        g = torch.Generator(); g.manual_seed(k)
        noise[i] = torch.empty(V).exponential_(generator=g)
    return noise

def after(keys, V):
    noise = torch.empty(len(keys), V).exponential_()
    noise[torch.arange(len(keys))] = seeded_uniform(keys, V, "cpu").log_().neg_()
    return noise

V = 49152
print("B     before ms  after ms  before ops  after ops")
for B in (1, 8, 64, 256):
    keys = [_mix(s, 3) for s in range(B)]
    row = [B]
    for f in (before, after):
        f(keys, V)
        ts = []
        for _ in range(5):
            t = time.perf_counter(); f(keys, V); ts.append((time.perf_counter() - t) * 1e3)
        row.append(statistics.median(ts))
    for f in (before, after):
        with profile(activities=[ProfilerActivity.CPU]) as p:
            f(keys, V)
        row.append(sum(1 for e in p.events() if e.name.startswith("aten::") and e.cpu_parent is None))
    print("%-5d %9.2f %9.2f %11d %10d" % tuple(row))
