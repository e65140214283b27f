"""bf16 linear layers whose one-row CUDA forward runs our CUDA-core GEMV instead of cuBLAS.

At one activation row (decode of one request) a linear layer is a GEMV bound by reading its
weight once. The bf16 form of the W12 GEMV (``specpilot/w12/gemv.py``: ``bf16_gemv``, tuned per
shape on first use, the register look-ahead among its candidates) ran every linear-layer shape
of Qwen3.8-27B and Muse-Glimmer-30B faster than cuBLAS on the H200, 7% over a decode step's
linear layers (session 25, docs/benchmarks/w12.md). At two rows it measured slower than cuBLAS
(session 24), so only M = 1 takes it.

``use_gemv(model)`` turns every plain bf16 ``nn.Linear`` of a model into a ``GemvLinear`` (same
parameters, nothing copied); the model runner does it for bf16 models on CUDA GPUs of compute
capability >= 9 (the GPUs it was measured on) unless ``$SPECPILOT_BF16_GEMV`` is "0".
``FUSE_GEMV = False`` sends every call back to ``F.linear`` (the A side of an A/B in the GPU
scripts). The GEMV's config is tuned at the first eager call of each shape (the engine's warm-up
before CUDA-graph capture; ``kernel.autotune_enabled``), else its default is used.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

FUSE_GEMV = True   # False: F.linear at every M (benchmarks' A/B)


def _gemv_device(x: torch.Tensor) -> bool:
    """Where the GEMV path runs: CUDA tensors (tests stand in the interpreter here)."""
    return x.is_cuda


class GemvLinear(nn.Linear):
    """``nn.Linear`` whose bf16 forward at one activation row on CUDA is ``bf16_gemv``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (FUSE_GEMV and x.numel() == self.in_features and x.dtype == torch.bfloat16
                and self.weight.dtype == torch.bfloat16 and _gemv_device(x)):
            from specpilot.w12.gemv import bf16_gemv

            y = bf16_gemv(x.reshape(1, self.in_features), self.weight)
            if self.bias is not None:
                y = y + self.bias
            return y.reshape(*x.shape[:-1], self.out_features)
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
    only: the parameters, tied ones included, stay the same objects). Returns how many."""
    n = 0
    for module in model.modules():
        if type(module) is nn.Linear and module.weight.dtype == torch.bfloat16:
            module.__class__ = GemvLinear
            n += 1
    return n
