"""bf16 linear layers whose one-row CUDA forward runs our CUDA-core GEMV instead of cuBLAS.

At one activation row (decode of one request) a linear layer is a GEMV bound by reading its
weight once. The bf16 form of the W12 GEMV (``specpilot/w12/gemv.py``: ``bf16_gemv``, tuned per
shape on first use, the register look-ahead among its candidates) ran every linear-layer shape
of Qwen3.8-27B and Muse-Glimmer-30B faster than cuBLAS on the H200, 6-7% over a decode step's
linear layers (session 25, docs/benchmarks/w12.md). At two rows it measured slower than cuBLAS
(session 24, before the look-ahead), so only M = 1 takes it.

More rows (a verify's, several requests' decode rows) stay on cuBLAS: ``w12.mma.bf16_mma``
(the W12 tensor-core loop on bf16 words, with PDL) at a verify's 8 / 16 rows measured 1.00x /
0.88x of cuBLAS per token of Qwen3.8-27B's layers, and a ``stock`` step with it 1.0-1.2 ms
slower on both targets (session 34, docs/benchmarks/hybrid.md). The one layer where it was
faster side by side is the lm_head (1.07-1.09x of cuBLAS at 2-16 rows on both targets, session
35, docs/benchmarks/w12.md), which a ``stock`` step runs twice (the drafter's head and the
verify's): ``FUSE_MMA_HEAD`` sends the lm_head's 2-16-row calls captured into a graph to
``bf16_mma``. On unless ``$SPECPILOT_BF16_MMA_HEAD`` is "0": in one process (session 36,
``gpu_graph_check.py --ab bf16_mma_head``, docs/benchmarks/hybrid.md) the ``stock`` step was
0.04 / 0.07 ms faster with it (Qwen3.8-27B block 8 / Muse-Glimmer-30B block 16, medians of
three rounds) and the overlapped step 0.13 / 0.02 ms: small, about the rounds' spread, but
faster on both.

``FUSE_WGMMA`` (off unless ``$SPECPILOT_BF16_WGMMA`` is "1"): the other 2..``wgmma.MAX_M``-row
calls captured into a graph (a verify's GEMMs, several requests' decode rows; the lm_head's
2-16 rows stay on ``bf16_mma`` with ``FUSE_MMA_HEAD``) run ``w12.wgmma.bf16_wgmma`` on sm_90 (the
W12 warpgroup-MMA loop on bf16 words: the weights go straight to wgmma's A registers, x
through shared memory). Built in session 38 without a GPU: off until a ``stock`` step measures
faster with it (``gpu_graph_check.py --ab bf16_wgmma``).

``use_gemv(model)`` turns every plain bf16 ``nn.Linear`` of a model into a ``GemvLinear`` (same
parameters, nothing copied); the model runner does it for bf16 models on CUDA GPUs of compute
capability >= 9 (the GPUs it was measured on) unless ``$SPECPILOT_BF16_GEMV`` is "0".
``FUSE_GEMV = False`` sends every call back to ``F.linear`` (the A side of an A/B in the GPU
scripts). Only calls captured into a CUDA graph run the GEMV (see ``GemvLinear``); its config is
tuned at the first eager call of each shape (the engine's warm-up before capture;
``kernel.autotune_enabled``), else its default is used. Inside ``graph_twin()`` eager calls take
the graph's path too (the cost model's kernel profile runs a graph's code eagerly and needs the
same kernels).
"""
from __future__ import annotations

import contextlib
import os

import torch
import torch.nn.functional as F
from torch import nn

FUSE_GEMV = True   # False: F.linear at every M (benchmarks' A/B)

_HEAD_ENV = os.environ.get("SPECPILOT_BF16_MMA_HEAD")
if _HEAD_ENV not in (None, "0", "1"):
    raise ValueError(f"$SPECPILOT_BF16_MMA_HEAD must be 0 or 1, got {_HEAD_ENV!r}")
FUSE_MMA_HEAD = _HEAD_ENV != "0"   # lm_head's 2..16 rows in graphs: bf16_mma
_WG_ENV = os.environ.get("SPECPILOT_BF16_WGMMA")
if _WG_ENV not in (None, "0", "1"):
    raise ValueError(f"$SPECPILOT_BF16_WGMMA must be 0 or 1, got {_WG_ENV!r}")
FUSE_WGMMA = _WG_ENV == "1"   # other 2..wgmma.MAX_M rows in graphs on sm_90: bf16_wgmma
_TWIN = False      # True inside graph_twin()


def _gemv_device(x: torch.Tensor) -> bool:
    """Where the GEMV path runs: CUDA tensors (tests stand in the interpreter here)."""
    return x.is_cuda


def _in_graph() -> bool:
    """Whether this call is being captured into a CUDA graph, or stands in for one
    (``graph_twin``); tests stand in here too."""
    return _TWIN or (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


@contextlib.contextmanager
def graph_twin():
    """Eager calls inside the block run what a CUDA-graph capture would (the GEMV at one row),
    so that an eager run of a graph's code launches the graph's kernels (costmodel/profile.py,
    the kernel profile's labelled eager run)."""
    global _TWIN
    old, _TWIN = _TWIN, True
    try:
        yield
    finally:
        _TWIN = old


class GemvLinear(nn.Linear):
    """``nn.Linear`` whose bf16 forward at one activation row on CUDA is ``bf16_gemv`` inside
    CUDA graphs (and, for the lm_head with ``FUSE_MMA_HEAD``, at 2-16 rows ``bf16_mma``; with
    ``FUSE_WGMMA``, at the other 2..``wgmma.MAX_M`` rows on sm_90 ``bf16_wgmma``). Eager
    calls keep ``F.linear``: a Triton launch from Python costs far more host time than cuBLAS's
    (eager ``ar`` decode measured 1.7-2.2x slower with the GEMV in every eager call, session
    25), and in a graph that cost is paid once at capture. The first eager call at a row count
    tunes the kernel's config (the engine's warm-up before capture), so the captured graph runs
    the tuned one. ``is_head``: set by ``use_gemv`` on the model's lm_head."""

    is_head = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // self.in_features
        ours = (x.shape[-1:] == (self.in_features,) and x.dtype == torch.bfloat16
                and self.weight.dtype == torch.bfloat16 and _gemv_device(x))
        if ours and FUSE_GEMV and rows == 1:
            from specpilot.w12 import gemv

            return self._ours(x, 1, gemv.bf16_gemv, gemv.bf16_gemv_config, "_gemv_tuned")
        if ours and FUSE_MMA_HEAD and self.is_head and rows >= 2:
            from specpilot.w12 import mma

            if mma.bf16_mma_supported(rows, self.in_features):   # up to mma.MAX_M rows
                return self._ours(x, rows, mma.bf16_mma, mma.tuned_config, f"_mma_tuned{rows}")
        if ours and FUSE_WGMMA and rows >= 2:
            from specpilot.w12 import wgmma

            if wgmma.supported(rows, self.in_features, x.device):   # sm_90, <= wgmma.MAX_M
                return self._ours(x, rows, wgmma.bf16_wgmma, wgmma.tuned_config,
                                  f"_wg_tuned{rows}")
        return F.linear(x, self.weight, self.bias)

    def _ours(self, x, rows: int, run, config, tuned: str) -> torch.Tensor:
        """In a graph: ``run`` on x as [rows, K], plus the bias. Eager: F.linear, and on the
        module's first eager call at this many rows ``config`` (tuned now, cached for the
        capture)."""
        x2 = x.reshape(rows, self.in_features)
        if _in_graph():
            y = run(x2, self.weight)
            if self.bias is not None:
                y = y + self.bias
            return y.reshape(*x.shape[:-1], self.out_features)
        if not getattr(self, tuned, False):
            config(x2, self.weight)
            setattr(self, tuned, True)
        return F.linear(x, self.weight, self.bias)


def gemv_wanted(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether the model runner should call ``use_gemv``: bf16 on a CUDA GPU of compute
    capability >= 9 with Triton, and ``$SPECPILOT_BF16_GEMV`` not "0"."""
    if device.type != "cuda" or dtype != torch.bfloat16 or os.environ.get(
            "SPECPILOT_BF16_GEMV") == "0":
        return False
    from specpilot.w12 import gemv

    return gemv.gemv_supported(1) and torch.cuda.get_device_capability(device)[0] >= 9


def use_gemv(model: nn.Module) -> int:
    """Every plain bf16 ``nn.Linear`` of ``model`` becomes a ``GemvLinear`` in place (its class
    only: the parameters, tied ones included, stay the same objects); the one named lm_head gets
    ``is_head``. Returns how many."""
    n = 0
    for name, module in model.named_modules():
        if type(module) is nn.Linear and module.weight.dtype == torch.bfloat16:
            module.__class__ = GemvLinear
            if name.split(".")[-1] == "lm_head":
                module.is_head = True
            n += 1
    return n
