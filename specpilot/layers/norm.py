"""RMSNorm with the Hugging Face Llama/Qwen3 numerics (normalise in fp32, scale in the input dtype).

On CUDA tensors the modules run the Triton kernels of kernels/norm.py (same numerics up to the
reduction order, one launch instead of several); elsewhere, or with USE_TRITON = False (a switch
for tests and benchmarks), the torch code below. GatedMLP's silu_mul (models/llama.py)
follows the same switch through triton_kernels().

forward_add(x, delta) returns (norm(x + delta), x + delta): the decoder layers hand each residual
add to the norm that follows it, so on the Triton path the add runs inside the norm kernel. The
sum is rounded to x's dtype before it is normalised, on both paths, so the torch path (add, then
forward) gives exactly what separate add and norm gave. A sandwich model (Muse-Glimmer) hands on
its post-norms unapplied, as PendingNorm(raw, norm): forward_add then folds that norm into the
same launch (kernels/norm.py `pre`), with the numbers the two launches gave; FUSE_PRE_NORM =
False gives each its own launch (a switch for benchmarks).
"""

import functools
import importlib
from typing import NamedTuple

import torch
from torch import nn

USE_TRITON = True  # CUDA tensors take the Triton kernels (kernels/norm.py); False: always torch
FUSE_PRE_NORM = True  # a PendingNorm runs inside the launch of the norm that adds it


@functools.lru_cache(maxsize=None)
def _kernel_module(name: str):
    return importlib.import_module(f"specpilot.kernels.{name}")  # triton: a GPU requirement


def triton_kernels(x: torch.Tensor, name: str = "norm"):
    """The kernel module specpilot.kernels.<name> (norm, rope, kv_store, noise) when x should
    take the Triton path (CUDA, USE_TRITON, and autograd off: the kernels have no backward, so
    training, e.g. the drafter recipe, runs the torch code), else None."""
    if USE_TRITON and x.is_cuda and not torch.is_grad_enabled():
        return _kernel_module(name)
    return None


class PendingNorm(NamedTuple):
    """norm(raw), not yet computed: a residual branch's post-norm left to the norm that adds the
    branch (FusedAddNorm.forward_add), so both run in one launch on the Triton path."""
    raw: torch.Tensor
    norm: "FusedAddNorm"

    def value(self) -> torch.Tensor:
        return self.norm(self.raw)


def resolve(delta):
    """A residual delta as a tensor (a PendingNorm applied), or None."""
    return delta.value() if isinstance(delta, PendingNorm) else delta


class FusedAddNorm(nn.Module):
    """A norm with forward_add; subclasses give _fused_add(kernels, x, delta, pre), the Triton
    call, and _pre_spec(kernels), their numerics as another norm's `pre` (None: not foldable)."""

    def forward_add(self, x: torch.Tensor, delta):
        """(self(x + delta), x + delta), the sum in x's dtype; delta None: (self(x), x). delta
        may be a PendingNorm: its norm is applied to its raw tensor first."""
        if delta is not None:
            kernels = triton_kernels(x)
            if kernels is not None:
                if isinstance(delta, PendingNorm):
                    pre = delta.norm._pre_spec(kernels) if FUSE_PRE_NORM else None
                    if pre is not None:
                        return self._fused_add(kernels, x, delta.raw, pre)
                return self._fused_add(kernels, x, resolve(delta))
            x = x + resolve(delta)
        return self(x), x

    def _pre_spec(self, kernels):
        return None

    def head_spec(self, dtype: torch.dtype):
        """This norm as a per-head norm inside kernels/rope.py's launch (q_norm / k_norm), or
        None when it cannot be folded. The zero-centred, fp32-weight and weightless norms fold as
        they fold as a `pre`; the plain RMSNorm says so itself."""
        return self._pre_spec(_kernel_module("norm"))


class RMSNorm(FusedAddNorm):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., dim] -> [..., dim]
        kernels = triton_kernels(x)
        if kernels is not None:
            return kernels.rms_norm(x, self.weight, self.eps)
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)

    def _fused_add(self, kernels, x, delta, pre=None):
        return kernels.rms_norm(x, self.weight, self.eps, residual=delta, pre=pre)

    def head_spec(self, dtype: torch.dtype):
        """Plain style (weight * normed.to(dtype)); None for a weight of another dtype, whose
        product would be promoted."""
        if self.weight.dtype != dtype:
            return None
        return _kernel_module("norm").head_norm(self.weight, self.eps)


class ZeroCenteredRMSNorm(FusedAddNorm):
    """Qwen3.5 RMSNorm: weight stored as w, applied as (1 + w), product taken in fp32."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kernels = triton_kernels(x)
        if kernels is not None:
            return kernels.rms_norm(x, self.weight, self.eps, zero_centred=True)
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * (1.0 + self.weight.float())).type_as(x)

    def _fused_add(self, kernels, x, delta, pre=None):
        return kernels.rms_norm(x, self.weight, self.eps, zero_centred=True, residual=delta,
                                pre=pre)

    def _pre_spec(self, kernels):
        return kernels.pre_norm(self.weight, self.eps, zero_centred=True)


class GatedRMSNorm(nn.Module):
    """RMSNorm of x, scaled by w, times silu(gate) (Gated DeltaNet output norm)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        kernels = triton_kernels(x)
        if kernels is not None:
            return kernels.gated_rms_norm(x, gate, self.weight, self.eps)
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        out = self.weight * x32.to(dtype)
        return (out * nn.functional.silu(gate.float())).to(dtype)
