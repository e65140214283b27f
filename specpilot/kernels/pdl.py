"""Programmatic dependent launch (PDL, sm_90 and later) for the kernels that take part.

A kernel *launched with PDL* (``launch_pdl=True``) may be scheduled while the kernel before it
in the stream is still running, once every program of that earlier kernel has executed
``launch_dependents`` (or exited). Inside a CUDA graph the same holds (a programmatic edge). What
it buys on a decode step: the launch latency and the ramp-up of the next kernel overlap the tail
of the one before, and a weight-streaming kernel can start pulling its weights into L2 before
its input exists.

The protocol every participating kernel follows (``PDL`` is a ``tl.constexpr``):

* a kernel launched with PDL calls ``wait(PDL)`` before its first read of anything an earlier
  kernel writes and before its first store (so a buffer an earlier kernel still reads is never
  overwritten early); before the wait it may read only what no kernel writes (weights). After
  the wait every earlier kernel has completed and its writes are visible, so the chain stays
  ordered transitively.
* ``launch_dependents(PDL)`` gives no memory ordering: called at a kernel's start it lets the
  next PDL-launched kernel's programs become resident early (they run up to their wait). It is a
  no-op when the next kernel was launched without PDL.

``enabled(t)`` decides per launch: a CUDA tensor on a GPU of compute capability >= 9, the
compiled (not interpreted) kernels, and ``$SPECPILOT_PDL`` not "0" (the A/B switch of the
benches). The kernels that use it: the W12 / bf16 GEMV (``specpilot/w12/gemv.py``: launched
with PDL, L2 prefetch of its first weight steps before the wait) and the norm kernels that
usually precede it (``kernels/norm.py``: launch_dependents only).
"""
from __future__ import annotations

import os

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: no kernels, enabled() is False
    triton = None
    tl = None

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CAPABLE: dict = {}


def enabled(t: torch.Tensor) -> bool:
    """Whether kernels on t's device launch with PDL (see the module docstring)."""
    if triton is None or INTERPRET or not t.is_cuda or os.environ.get("SPECPILOT_PDL") == "0":
        return False
    index = t.device.index if t.device.index is not None else torch.cuda.current_device()
    if index not in _CAPABLE:
        _CAPABLE[index] = torch.cuda.get_device_capability(index)[0] >= 9
    return _CAPABLE[index]


if triton is not None:
    @triton.jit
    def wait(PDL: tl.constexpr):
        """Block until every earlier kernel has completed and its writes are visible (PDL)."""
        if PDL:
            tl.extra.cuda.gdc_wait()

    @triton.jit
    def launch_dependents(PDL: tl.constexpr):
        """Allow the next PDL-launched kernel to be scheduled (no memory ordering)."""
        if PDL:
            tl.extra.cuda.gdc_launch_dependents()
