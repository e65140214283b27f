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
the KV store, attention and its merge, the conv and Gated DeltaNet kernels). Where each lets the
next kernel launch is a setting, because it decides how many kernels' programs are parked in SM
slots at once:
- ``MODE`` (all but the GEMVs, ``start(PDL)``): 1 trigger then wait (the default: the next
  kernel may launch while this one still waits for its predecessor, so launches can run several
  kernels ahead), 2 wait then trigger (at most one kernel ahead of the running one).
- ``GEMV_TRIGGER`` (per weight form, ``w12/gemv.py``): 1 at the start, before the wait; 2 after
  the main loop (the default); 3 right after the wait. The GEMVs load their escape entries and
  (with ``ahead`` 1 or 2) their first weight tiles before the wait.
Measured on the H200 (docs/benchmarks/w12.md, session 29), with ``MODE`` 1: the GEMVs at 1 made
the bf16 `ar` step 0.90x (presumably later kernels' programs parked in SM slots through whole
GEMVs; not profiled), at 2 `ar` at one request runs 1.02-1.04x faster (bf16 on both target
shapes, W12 on Qwen3.8-27B). Session 30 (same process): ``MODE`` 2 with ``GEMV_TRIGGER`` 3 or 2
was slower than the default 1 / 2 for both kinds (bf16 13.81 / 13.74 against 13.70 ms, W12
11.51 / 11.39 against 11.34 ms).
cuBLAS and torch's own kernels are launched as before (a PDL kernel after one of them starts when
it ends).

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
MODE = 1                             # start(): 1 trigger then wait, 2 wait then trigger
GEMV_TRIGGER = {"w12": 2, "bf16": 2}  # 1 at the start, 2 after the main loop, 3 after the wait


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


def launch_args(t: torch.Tensor, mode: int | None = None) -> dict:
    """Keyword arguments of a launch on ``t``'s device of a kernel with a ``PDL`` constexpr:
    ``PDL=mode, launch_pdl=True`` when active (``mode`` default ``MODE``, for kernels that begin
    with ``start(PDL)``), else none (the interpreter knows no ``launch_pdl``)."""
    if not active(t):
        return {}
    return {"PDL": MODE if mode is None else mode, "launch_pdl": True}


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

    @triton.jit
    def start(PDL: tl.constexpr):
        """First thing in a kernel launched with ``launch_args``: PDL 0 nothing; 1 let the next
        kernel launch, then wait for the previous one; 2 wait, then let the next one launch."""
        launch_dependents(PDL == 1)
        wait(PDL > 0)
        launch_dependents(PDL == 2)
