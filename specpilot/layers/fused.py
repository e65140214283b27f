"""Projections that read the same input, computed as one GEMM.

Checkpoints store q/k/v (and gates) and MLP gate/up as separate matrices, which is what the
loader fills. After loading, `fuse_projections(model)` concatenates each group a module declares
in its FUSED attribute ({"qkv": ("q_proj", "k_proj", "v_proj"), ...}) into one nn.Linear and
drops the parts: one weight read and one launch instead of several small ones (the k/v
projections of a GQA model are narrow GEMMs that waste most of the bandwidth on their own).
Modules compute a group with `project(self, "qkv", x)`, which splits the fused output, or calls
the separate parts when the model was not fused (a module built but not yet loaded).
`fuse_rows` goes one step further for linears of different modules that read one input (the
drafter's per-layer context K/V): one owner linear holds all their rows, and each part becomes
a parameter-free RowSlice view of its rows, so it can still run alone on other inputs.
"""

from __future__ import annotations

import torch
from torch import nn


def fused_linear(parts: list[nn.Linear]) -> nn.Linear:
    """One nn.Linear over the row-concatenation of the parts' weights (and biases)."""
    ref = parts[0]
    if any(p.in_features != ref.in_features or p.weight.dtype != ref.weight.dtype for p in parts):
        raise ValueError("fused projections need one input width and dtype")
    bias = any(p.bias is not None for p in parts)  # a part without one gets zeros (exact)
    out = nn.Linear(ref.in_features, sum(p.out_features for p in parts),
                    bias=bias, device=ref.weight.device, dtype=ref.weight.dtype)
    with torch.no_grad():
        out.weight.copy_(torch.cat([p.weight for p in parts], dim=0))
        if out.bias is not None:
            out.bias.copy_(torch.cat([p.bias if p.bias is not None else
                                      p.weight.new_zeros(p.out_features) for p in parts], dim=0))
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
    # only the owners are listed: a list of every module would hold each replaced part (and its
    # weight) alive until the end, so that a whole model's fused groups were held twice at the
    # peak (Qwen3.8-27B in bf16 ran out of an H100's 80 GB at build, session 41)
    owners = [m for m in model.modules() if getattr(m, "FUSED", None)]
    for module in owners:
        for group, names in module.FUSED.items():
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


class RowSlice(nn.Module):
    """Rows [start, stop) of the nn.Linear `owner.<name>`, as a linear layer of its own.

    It holds no parameter (owner sits in a list, out of the module tree), so the rows are stored
    once, in the owner's linear. That linear is looked up on every call: one that is no longer an
    nn.Linear (e.g. converted to W12 after fuse_rows) raises instead of leaving stale rows in use.
    """

    def __init__(self, owner: nn.Module, name: str, start: int, stop: int):
        super().__init__()
        self._owner, self.name, self.start, self.stop = [owner], name, start, stop
        self.out_features = stop - start

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lin = getattr(self._owner[0], self.name)
        if type(lin) is not nn.Linear:
            raise TypeError(f"RowSlice of {self.name} needs an nn.Linear there, found "
                            f"{type(lin).__name__}: convert weights before fuse_rows, or skip it")
        rows = slice(self.start, self.stop)
        return nn.functional.linear(x, lin.weight[rows], None if lin.bias is None else
                                    lin.bias[rows])

    def extra_repr(self) -> str:
        return f"{self.name}[{self.start}:{self.stop}]"


def fuse_rows(owner: nn.Module, name: str, parts: list[tuple[nn.Module, str]]) -> nn.Linear:
    """One nn.Linear `owner.<name>` over the row-concatenation of the linears module.<attr> for
    (module, attr) in parts (all reading the same kind of input), each replaced by a RowSlice of
    its rows: one GEMM computes every part at once, and each part can still run alone, with no
    weight stored twice."""
    lins = [module._modules.get(attr) for module, attr in parts]
    if not all(type(lin) is nn.Linear for lin in lins):
        raise TypeError(f"fuse_rows({name}) needs plain nn.Linear parts, got "
                        f"{sorted({type(lin).__name__ for lin in lins})}")
    setattr(owner, name, fused_linear(lins))
    start = 0
    for (module, attr), lin in zip(parts, lins):
        setattr(module, attr, RowSlice(owner, name, start, start + lin.out_features))
        start += lin.out_features
    return getattr(owner, name)
