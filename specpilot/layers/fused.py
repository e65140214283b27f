"""Projections that read the same input, computed as one GEMM.

Checkpoints store q/k/v (and gates) and MLP gate/up as separate matrices, which is what the
loader fills. After loading, `fuse_projections(model)` concatenates each group a module declares
in its FUSED attribute ({"qkv": ("q_proj", "k_proj", "v_proj"), ...}) into one nn.Linear and
drops the parts: one weight read and one launch instead of several small ones (the k/v
projections of a GQA model are narrow GEMMs that waste most of the bandwidth on their own).
Modules compute a group with `project(self, "qkv", x)`, which splits the fused output, or calls
the separate parts when the model was not fused (a module built but not yet loaded).
"""

from __future__ import annotations

import torch
from torch import nn


class FusedLinear(nn.Linear):
    """nn.Linear over the row-concatenation of several weights; `sizes` are the parts' widths."""

    def __init__(self, parts: list[nn.Linear]):
        ref = parts[0]
        if any(p.in_features != ref.in_features or p.weight.dtype != ref.weight.dtype
               or (p.bias is None) != (ref.bias is None) for p in parts):
            raise ValueError("fused projections need one input width, dtype and bias setting")
        out = sum(p.out_features for p in parts)
        super().__init__(ref.in_features, out, bias=ref.bias is not None,
                         device=ref.weight.device, dtype=ref.weight.dtype)
        with torch.no_grad():
            self.weight.copy_(torch.cat([p.weight for p in parts], dim=0))
            if self.bias is not None:
                self.bias.copy_(torch.cat([p.bias for p in parts], dim=0))
        self.sizes = [p.out_features for p in parts]


def project(module: nn.Module, group: str, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The outputs of module.FUSED[group]'s projections for input x, in their declared order."""
    fused = module._modules.get(group)
    if fused is not None:
        return fused(x).split(fused.sizes, dim=-1)
    return tuple(getattr(module, name)(x) for name in module.FUSED[group])


def fuse_projections(model: nn.Module) -> int:
    """Fuse every group declared by a module's FUSED mapping, in place. Returns the number of
    groups fused. Parts that are not plain nn.Linear (already fused or converted) are skipped."""
    n = 0
    for module in list(model.modules()):
        for group, names in getattr(module, "FUSED", {}).items():
            parts = [module._modules.get(name) for name in names]
            if group in module._modules or not all(type(p) is nn.Linear for p in parts):
                continue
            setattr(module, group, FusedLinear(parts))
            for name in names:
                delattr(module, name)
            n += 1
    return n
