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


def fused_linear(parts: list[nn.Linear]) -> nn.Linear:
    """One nn.Linear over the row-concatenation of the parts' weights (and biases)."""
    ref = parts[0]
    if any(p.in_features != ref.in_features or p.weight.dtype != ref.weight.dtype
           or (p.bias is None) != (ref.bias is None) for p in parts):
        raise ValueError("fused projections need one input width, dtype and bias setting")
    out = nn.Linear(ref.in_features, sum(p.out_features for p in parts),
                    bias=ref.bias is not None, device=ref.weight.device, dtype=ref.weight.dtype)
    with torch.no_grad():
        out.weight.copy_(torch.cat([p.weight for p in parts], dim=0))
        if out.bias is not None:
            out.bias.copy_(torch.cat([p.bias for p in parts], dim=0))
    return out


def project(module: nn.Module, group: str, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The outputs of module.FUSED[group]'s projections for input x, in their declared order."""
    sizes = getattr(module, "fused_sizes", {}).get(group)
    if sizes is not None:
        return module._modules[group](x).split(sizes, dim=-1)
    return tuple(getattr(module, name)(x) for name in module.FUSED[group])


def fuse_projections(model: nn.Module) -> int:
    """Fuse every group declared by a module's FUSED mapping, in place. Returns the number of
    groups fused. The split widths live on the owning module (`fused_sizes`), so the fused
    layer may later be replaced by any linear of the same shape (e.g. a W12Linear)."""
    n = 0
    for module in list(model.modules()):
        for group, names in getattr(module, "FUSED", {}).items():
            parts = [module._modules.get(name) for name in names]
            if group in module._modules or not all(type(p) is nn.Linear for p in parts):
                continue
            setattr(module, group, fused_linear(parts))
            module.fused_sizes = {**getattr(module, "fused_sizes", {}),
                                  group: [p.out_features for p in parts]}
            for name in names:
                delattr(module, name)
            n += 1
    return n
