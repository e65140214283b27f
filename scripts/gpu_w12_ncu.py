"""Nsight Compute on the few-row GEMMs: what limits W12-MMA against the same loop on bf16 words,
and the same for the warpgroup-MMA kernel (W12 or bf16 words) at more rows.

Run under ncu from the repository root on a CUDA machine (ncu's default cache control flushes the
caches before each profiled kernel; ``--clock-control none`` leaves the clocks as they run):

    ncu --profile-from-start off --clock-control none --set full -o /tmp/w12 \\
        python3 scripts/gpu_w12_ncu.py --shape 34816,5120 \\
        --cases w12:2:2/1/2/8/0/1/1,bf16:8:2/1/2/4,cublas:8
    ncu -i /tmp/w12.ncu-rep --page details > details.txt

Each case (``kind:M[:config]``, kind w12 | bf16 | wg12 | wgbf16 | ws | wsbare | cublas, config
as ``MmaConfig``'s fields (w12, bf16: ``mma.py``), ``WgConfig``'s (wg12, wgbf16: ``wgmma.py``,
groups/words/split, e.g. ``wg12:32:1/8/2``) or ``WsConfig``'s (ws, wsbare: ``ws.py``; wsbare on
the planes with an empty escape list, timing only: wrong outputs) joined by "/") runs twice
outside the profiled range (compilation, warm-up), then once inside ``cudaProfilerStart`` /
``Stop``, so the report holds one kernel per case, in the order given (cuBLAS may add its own
small kernels). Weights:
gpu_w12_gemv_bench's build_weights (random N(0, 0.02^2) with planted escapes, one encoded block
replicated). Prints one line per case: its order in the report and the config.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu_w12_gemv_bench as GB  # noqa: E402
from specpilot.w12 import mma as MM  # noqa: E402
from specpilot.w12 import wgmma as WG  # noqa: E402
from specpilot.w12 import ws as WS  # noqa: E402

KINDS = {"w12": (MM.MmaConfig, MM.w12_mma), "bf16": (MM.MmaConfig, MM.bf16_mma),
         "wg12": (WG.WgConfig, WG.w12_wgmma), "wgbf16": (WG.WgConfig, WG.bf16_wgmma),
         "ws": (WS.WsConfig, WS.w12_ws), "wsbare": (WS.WsConfig, WS.w12_ws),
         "cublas": (None, None)}


def parse_case(text: str) -> tuple:
    parts = text.strip().split(":")
    if len(parts) not in (2, 3) or parts[0] not in KINDS:
        raise SystemExit(f"bad case {text!r}: kind:M[:config], kind one of {', '.join(KINDS)}")
    make = KINDS[parts[0]][0]
    try:
        cfg = make(*(int(v) for v in parts[2].split("/"))) if len(parts) == 3 else None
    except (TypeError, ValueError) as e:
        raise SystemExit(f"bad case {text!r}: {e}") from e
    if parts[0] != "cublas" and cfg is None:
        raise SystemExit(f"case {text!r}: {parts[0]} needs a config")
    return parts[0], int(parts[1]), cfg


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="34816,5120", help="N,K of the weight")
    ap.add_argument("--cases", required=True, help="comma-separated kind:M[:config]")
    ap.add_argument("--block-rows", type=int, default=1024)
    args = ap.parse_args()
    N, K = (int(v) for v in args.shape.split(","))
    cases = [parse_case(c) for c in args.cases.split(",")]
    planes, w = GB.build_weights([(None, None, N, K, None)], args.block_rows)[(N, K)]
    bare = GB.bare_ring([planes])[0]
    torch.manual_seed(0)
    for i, (kind, M, cfg) in enumerate(cases):
        x = torch.randn(M, K, device="cuda").bfloat16()
        fn = KINDS[kind][1]
        if kind == "cublas":
            def run():
                return x @ w.t()
        else:
            def run():
                return fn(x, {"w12": planes, "wg12": planes, "ws": planes,
                              "wsbare": bare}.get(kind, w), cfg)
        for _ in range(2):
            run()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        run()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        print(f"case {i}: {kind} M={M} {cfg.short if cfg else ''} on {N} x {K}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
