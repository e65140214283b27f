"""A/B of the overlap scheduler with a queue at --max-running-requests (a script, GPU).

Session 56 changed `Scheduler._next_overlapped`: a queue whose head cannot be admitted (the
running requests are at --max-running-requests) no longer stops the next step from being
queued behind the one in flight; before, any waiting request did ("old" here, restored by
wrapping the method). This times both on the real shapes with dummy weights: N requests of
varied lengths (so they end at different steps and the queue is admitted one by one) through
`ar` and `stock` with the overlap scheduler at --max-running-requests M, old and new in
alternating rounds in one process. Acceptance is SIMULATED (SGLANG_SIMULATE_ACC_LEN).

    python scripts/gpu_queue_overlap.py [--target qwen38-27b] [--drafter dflash2] [--accept 4.8]
        [--max-running 8] [--requests 16,32] [--rounds 2] [--out FILE]

A smoke run on the CPU (the script's plumbing, no timing worth quoting), e.g. with the demo
model and its drafter: --device cpu --target-path DIR --drafter-path DIR --prompt-len 16.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from specpilot.config import ServerArgs  # noqa: E402
from specpilot.core import GenerateInput, SamplingParams  # noqa: E402
from specpilot.offline import OfflineEngine  # noqa: E402
from specpilot.scheduler.scheduler import Scheduler  # noqa: E402

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "specpilot", "model_configs")


class OldQueueRule(Scheduler):
    """The overlap rule before session 56: any waiting request makes the host read the step in
    flight before the next is queued."""

    def _next_overlapped(self, prev):
        if self.waiting:
            return None
        return super()._next_overlapped(prev)


def workload(n: int, prompt_len: int, vocab: int, new: tuple[int, int],
             seed: int = 0) -> list[tuple[list[int], int]]:
    """n (prompt ids, max_new_tokens) pairs: random prompts, lengths uniform in new."""
    rng = random.Random(seed)
    return [([rng.randrange(10, vocab - 10) for _ in range(prompt_len)],
             rng.randint(new[0], new[1])) for _ in range(n)]


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed_run(sched: Scheduler, jobs) -> dict:
    """All jobs added at once; wall time until the scheduler is idle, tokens produced."""
    sync()
    t0 = time.perf_counter()
    for i, (ids, new) in enumerate(jobs):
        sched.add_request(GenerateInput(f"q{time.time()}-{i}", ids, SamplingParams(
            temperature=0, max_new_tokens=new, ignore_eos=True)))
    steps = 0
    while not sched.is_idle():
        sched.step()
        steps += 1
    sync()
    dt = time.perf_counter() - t0
    produced = sum(new for _, new in jobs)
    return {"wall_s": dt, "tokens": produced, "tok_s": produced / dt, "host_steps": steps,
            "retractions": sched.num_retractions}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="qwen38-27b")
    ap.add_argument("--drafter", default="dflash2")
    ap.add_argument("--accept", type=float, default=4.8)
    ap.add_argument("--max-running", type=int, default=8)
    ap.add_argument("--requests", default="16,32")
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--new", default="48,144", help="output lengths: uniform in this range")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--engines", default="ar,stock")
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--target-path", default=None, help="a model folder instead of --target's config")
    ap.add_argument("--drafter-path", default=None, help="a drafter folder instead of the config")
    a = ap.parse_args()
    cuda = a.device == "cuda"
    target = a.target_path or os.path.join(CONFIGS, a.target)
    drafter = a.drafter_path or os.path.join(CONFIGS, f"{a.target}-{a.drafter}")
    ns = [int(x) for x in a.requests.split(",")]
    new = tuple(int(x) for x in a.new.split(","))
    os.environ["SGLANG_SIMULATE_ACC_LEN"] = str(a.accept)
    device_name = torch.cuda.get_device_name() if cuda else "cpu"
    print(device_name, torch.__version__, flush=True)
    m = a.max_running
    t0 = time.perf_counter()
    eng = OfflineEngine(ServerArgs(
        model_path=target, device=a.device, dtype="bfloat16" if cuda else "float32",
        load_format="dummy", context_length=4096, max_total_tokens=m * (a.prompt_len + new[1] + 128),
        max_running_requests=m, skip_tokenizer_init=True, cuda_graph_max_bs=m,
        speculative_draft_load_format="dummy", disable_overlap_schedule=True,
        speculative_draft_model_path=drafter, disable_cuda_graph=not cuda,
        disable_draft_cuda_graph=not cuda))
    rn = eng.runner
    if cuda:
        rn.enable_cuda_graphs(m)   # ar's DECODE graphs on the same runner
    print(f"built + captured in {time.perf_counter() - t0:.1f}s", flush=True)
    vocab = rn.info.vocab_size
    runners = {"ar": rn, "stock": eng.worker}
    rows = []
    for name in a.engines.split(","):
        for n in ns:
            jobs = workload(n, a.prompt_len, vocab, new)
            make = {"old": lambda: OldQueueRule(runners[name], None, m, 8192, 65536, overlap=True),
                    "new": lambda: Scheduler(runners[name], None, m, 8192, 65536, overlap=True)}
            for mode in ("old", "new"):   # warm-up: each rule's steps at every batch size
                timed_run(make[mode](), jobs)   # it meets (session 57's first run warmed the
                # new rule on m requests only: its first timed round was slower, see hybrid.md)
            res = {"old": [], "new": []}
            for r in range(a.rounds):
                for mode in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    res[mode].append(timed_run(make[mode](), jobs))
            row = {"engine": name, "requests": n, "max_running": m}
            for mode in ("old", "new"):
                row[f"{mode}_tok_s"] = statistics.median(x["tok_s"] for x in res[mode])
                row[f"{mode}_all_tok_s"] = [round(x["tok_s"], 1) for x in res[mode]]
                row[f"{mode}_retractions"] = sum(x["retractions"] for x in res[mode])
            row["gain"] = row["new_tok_s"] / row["old_tok_s"]
            rows.append(row)
            print(row, flush=True)
    print(f"\n{os.path.basename(target)} + {os.path.basename(drafter)}, simulated acceptance {a.accept}, "
          f"--max-running-requests {m}, prompt {a.prompt_len}, outputs {new[0]}-{new[1]} tokens")
    print(f"{'engine':>6} {'requests':>8} {'old tok/s':>10} {'new tok/s':>10} {'gain':>6}")
    for r in rows:
        print(f"{r['engine']:>6} {r['requests']:>8} {r['old_tok_s']:10.1f} {r['new_tok_s']:10.1f} "
              f"{r['gain']:6.3f}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"device": device_name, "args": vars(a), "rows": rows}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
