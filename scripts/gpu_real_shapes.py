"""Real-shape runs with random weights (a script): Qwen3.8-27B and Muse-Glimmer-30B with their
DFlash2 drafters, `ar` and `stock`, on the torch reference path. Prints per-step decode times
and, for the hybrid target, the recurrent-state bytes a verify step moves (replay, as
implemented) against the per-position snapshot alternative.

Acceptance is SIMULATED (SGLANG_SIMULATE_ACC_LEN, default 3): random drafters accept nothing.

    python scripts/gpu_real_shapes.py [--targets qwen38-27b,muse-glimmer-30b] [--new 16]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from specpilot.config import ServerArgs  # noqa: E402
from specpilot.core import GenerateInput, SamplingParams  # noqa: E402
from specpilot.costmodel.profile import launch_counter  # noqa: E402
from specpilot.offline import OfflineEngine  # noqa: E402
from specpilot.scheduler.scheduler import Scheduler  # noqa: E402

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "specpilot", "model_configs")


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def decode_ms_per_step(sched, bs, prompt_len, new, vocab):
    """Admit bs requests, prefill them, then time the decode steps. -> (ms per launched step,
    tokens/s). Launched steps are the runner's calls from the scheduler (forward, launch_decode,
    launch_lagged; not the calls they make themselves), so an overlapped scheduler that reads a
    step before launching the next one is not credited with an extra step."""
    g = torch.Generator().manual_seed(0)
    for i in range(bs):
        ids = torch.randint(10, vocab - 10, (prompt_len,), generator=g).tolist()
        sched.add_request(GenerateInput(f"r{time.time()}-{i}", ids, SamplingParams(
            temperature=0, max_new_tokens=new, ignore_eos=True)))
    while sched.waiting:
        sched.step()
    produced0 = sum(len(r.output_ids) for r in sched.running)
    with launch_counter(sched.runner) as steps:
        sync()
        t = time.perf_counter()
        while not sched.is_idle():
            sched.step()
        sync()
    dt = time.perf_counter() - t
    total = bs * new - produced0
    return 1000 * dt / steps[0], total / dt


def state_bytes(model, b):
    """Recurrent-state bytes per request per verify step: replay (ours) vs snapshots."""
    if not hasattr(model, "recurrent_state_spec"):
        return None
    s = model.recurrent_state_spec()
    state = s["heads"] * s["dk"] * s["dv"] * 4
    conv = s["conv_dim"] * (s["conv_kernel"] - 1) * 4
    row = (s["conv_dim"] + s["heads"] * (s["dk"] + s["dv"] + 2)) * 4
    # replay: stash B rows (write + read back), read committed state + window, write new ones
    replay = s["num_layers"] * (2 * b * row + 2 * (state + conv))
    # snapshot: write the state after every row, read the accepted one, write it as committed
    snap = s["num_layers"] * (b * (state + conv) + 2 * (state + conv))
    return replay, snap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default="qwen38-27b,muse-glimmer-30b")
    ap.add_argument("--new", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--batch", default="1,4")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--config-dir", default=CONFIGS)
    a = ap.parse_args()
    os.environ.setdefault("SGLANG_SIMULATE_ACC_LEN", "3")
    rows = []
    for target in a.targets.split(","):
        t0 = time.perf_counter()
        args = ServerArgs(model_path=os.path.join(a.config_dir, target), device=a.device,
                          dtype="bfloat16", load_format="dummy", context_length=4096,
                          max_total_tokens=65536, max_running_requests=8,
                          skip_tokenizer_init=True, speculative_draft_load_format="dummy",
                          disable_overlap_schedule=True,  # plain stock beside plain ar
                          speculative_draft_model_path=os.path.join(a.config_dir,
                                                                    target + "-dflash2"))
        eng = OfflineEngine(args)
        print(f"{target}: built in {time.perf_counter() - t0:.1f}s, "
              f"{torch.cuda.memory_allocated() / 2**30 if torch.cuda.is_available() else 0:.1f} GiB", flush=True)
        b = eng.worker.num_draft_tokens
        ar = Scheduler(eng.runner, None, 8, 2048, 16384)
        for bs in map(int, a.batch.split(",")):
            ms, tps = decode_ms_per_step(ar, bs, a.prompt_len, a.new, eng.runner.info.vocab_size)
            rows.append((target, "ar", bs, b, ms, tps))
            ms, tps = decode_ms_per_step(eng.scheduler, bs, a.prompt_len, a.new,
                                         eng.runner.info.vocab_size)
            rows.append((target, "stock", bs, b, ms, tps))
            print(rows[-2], rows[-1], flush=True)
        sb = state_bytes(eng.runner.model, b)
        if sb:
            print(f"{target}: recurrent state per request per verify step (B={b}): replay "
                  f"{sb[0] / 2**20:.1f} MiB vs per-row snapshots {sb[1] / 2**20:.1f} MiB")
        del eng, ar
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    print(f"\n{'target':18} {'engine':6} {'bs':>3} {'B':>3} {'ms/step':>9} {'tok/s':>8}")
    for t, e, bs, b, ms, tps in rows:
        print(f"{t:18} {e:6} {bs:3} {b:3} {ms:9.1f} {tps:8.1f}")


if __name__ == "__main__":
    main()
