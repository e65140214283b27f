"""Programmatic dependent launch (PDL, Hopper and later): let a kernel start before the one
before it in the stream has finished.

Why: a decode step is a chain of a few hundred kernels, each waiting for the previous one to end
(its last blocks, the flush of its writes) and then for its own blocks to be launched. With PDL
the next kernel's blocks are launched as soon as every block of the running kernel has signalled
``launch_dependents`` (or ended) and the SMs have room; they may do work that reads nothing the
running kernel writes (our GEMVs: load their first weight tiles and escape entries, which are
constant) and then ``wait``, which returns once the previous kernel has completed and its writes
are visible. Inside a CUDA graph capture the launch attribute becomes a programmatic edge.

Rules that keep it exact:
- A kernel is launched with PDL (``launch_pdl=True``) only if it calls ``wait`` before its first
  read of anything an earlier kernel writes and before its first write (so it neither reads stale
  data nor overwrites what the previous kernel still reads).
- ``launch_dependents`` only lets the next kernel start early; where that kernel was launched
  without PDL, or on GPUs before sm_90, the instruction does nothing.

Which kernels: every Triton kernel of a decode / verify step (the GEMVs, norms, SiLU-mul, RoPE,
the KV store, attention and its merge, the conv and Gated DeltaNet kernels) waits first thing
(the GEMVs: after loading their escape entries and first weight tiles) and lets the next kernel
launch at once; the GEMVs let it launch only after their main loop (``GEMV_TRIGGER`` 2: with the
trigger at their start the next kernels' programs took SM slots while the GEMV streamed its
weights, the bf16 `ar` step 0.90x; after the loop: `ar` at one request 1.02-1.04x faster, bf16
on both target shapes and W12 on Qwen3.8-27B, H200, docs/benchmarks/w12.md, session 29). cuBLAS and torch's own kernels are launched
as before (a PDL kernel after one of them starts when it ends).

``ENABLED`` is set by the model runner: on for CUDA GPUs of compute capability >= 9 unless
``$SPECPILOT_PDL=0``; ``active(t)`` says whether launches on ``t``'s device use it. The
interpreter cannot run the instructions (inline PTX), so PDL is never active on CPU tensors.
"""
from __future__ import annotations

import functools
import os

import torch

try:
    import triton
    import triton.language as tl
except ImportError:   # CPU-only installs: nothing here runs
    triton = None
    tl = None

ENABLED = False
# where our GEMV (w12/gemv.py) lets the next kernel launch, per weight form: 1 at its start, 2
# after its main loop
GEMV_TRIGGER = {"w12": 2, "bf16": 2}


def setting_from_env() -> bool | None:
    """``$SPECPILOT_PDL``: "1" on, "0" off, unset None (on where ``supported``); anything else
    is an error."""
    v = os.environ.get("SPECPILOT_PDL")
    if v not in (None, "0", "1"):
        raise ValueError(f"$SPECPILOT_PDL must be 0 or 1, got {v!r}")
    return None if v is None else v == "1"


def supported(device: torch.device) -> bool:
    """PDL's instructions exist on CUDA GPUs of compute capability >= 9 (and not under the
    Triton interpreter)."""
    if device.type != "cuda" or triton is None or os.environ.get("TRITON_INTERPRET") == "1":
        return False
    return _major(device.index if device.index is not None else torch.cuda.current_device()) >= 9


@functools.lru_cache(maxsize=None)
def _major(index: int) -> int:
    return torch.cuda.get_device_capability(index)[0]


def active(t: torch.Tensor) -> bool:
    """Whether kernels launched on ``t``'s device use PDL now."""
    return ENABLED and t.is_cuda and supported(t.device)


def launch_args(t: torch.Tensor) -> dict:
    """Keyword arguments of a launch on ``t``'s device of a kernel with a ``PDL`` constexpr:
    ``PDL=True, launch_pdl=True`` when active, else none (the interpreter knows no
    ``launch_pdl``)."""
    return {"PDL": True, "launch_pdl": True} if active(t) else {}


if triton is not None:
    @triton.jit
    def wait(ON: tl.constexpr):
        """Block until the previous kernel in the stream has completed and its writes are
        visible (``griddepcontrol.wait``); nothing when ON is False."""
        if ON:
            tl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=tl.int32,
                                      is_pure=False, pack=1)

    @triton.jit
    def launch_dependents(ON: tl.constexpr):
        """Let the next kernel (if launched with PDL) start once every program of this one has
        run this (``griddepcontrol.launch_dependents``); nothing when ON is False."""
        if ON:
            tl.inline_asm_elementwise("griddepcontrol.launch_dependents; // $0", "=r", [],
                                      dtype=tl.int32, is_pure=False, pack=1)
