"""The warp-specialized W12 probe (scripts/gpu_w12_ws_probe.py) compiled for sm_90 on any machine:
its loop reads planes and x only from shared memory (16-byte reads), runs 2 S MMAs per 8-row
activation tile and round, and a producer warp issues the TMA copies. Its numerics run on the
GPU (the script's checks; docs/benchmarks/w12.md, session 44)."""
from __future__ import annotations

import json
import os
import sys

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CONFIGS = [(4, 3, 0, True), (4, 2, 128, True)]


def _compile() -> dict:
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import gpu_w12_ws_probe as W

    return W.compile_all(CONFIGS)


def test_ws_probe_compiles_for_sm90():
    pytest.importorskip("triton.experimental.gluon.language.nvidia.hopper")
    from tests.unit.sm90 import run_in_subprocess

    res = run_in_subprocess(__file__)
    assert len(res) == 2 * len(CONFIGS)
    for name, r in res.items():
        nt = 2 if name.endswith("nt2") else 1
        assert r["mma"] == 2 * 8 * nt, (name, r)            # S = 8 H words per lane and round
        # three plane tiles x two rows x 8 words, and per half and 8-token tile 16 x words
        assert r["lds_v4"] == 12 + 8 * nt, (name, r)
        # the producer: per round 3 plane tiles and 2 halves x 2 boxes x nt x-tiles per warp
        assert r["tma"] == 4 * (3 + 4 * nt), (name, r)
        assert r["setmaxnreg"] > 0 and r["spills"] in ([0], []), (name, r)
        assert r["smem"] <= 232448, (name, r)               # an H100 / H200 block's maximum


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    print(json.dumps(_compile()))
