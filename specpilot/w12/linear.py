"""W12Linear: an nn.Linear whose bf16 weight is stored as W12 (docs/w12.md), and the in-place
model converter ``convert_model_linears``.

Forward paths (chosen by the input's device, never silently):
* CUDA: ``kernel.w12_matmul`` (fused decode + GEMM; needs Triton, else a RuntimeError).
* CPU: the explicit reference path, ``format.decode`` + ``F.linear``, so CPU tests and tools
  work without a GPU. It decodes the weight on every call (no bf16 copy is kept).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import kernel
from .convert import PARTS, should_code
from .format import ESC_THRESHOLD, W12Tensor, decode, encode_auto


class W12Linear(nn.Module):
    """``y = x @ W^T + b`` with W held as W12 planes (buffers ``w12_L``, ``w12_H``, ``w12_hb``,
    ``w12_esc_off``, ``w12_esc``, as in the format) plus the kernels' escape indexes (the GEMV's
    over ``kernel.IDX_ROWS`` rows, the tensor-core GEMM's ``w12_tc_*`` over ``kernel.TC_IDX_ROWS``)
    and hb layout (non-persistent buffers, rebuilt from the format parts).

    ``reproducible``: on CUDA, use ``w12_matmul(..., reproducible=True)`` (bitwise equal to the
    bf16 Triton GEMM with the same config; slower when escapes are dense).
    """

    def __init__(self, w: W12Tensor, bias: torch.Tensor | None = None, reproducible: bool = False):
        super().__init__()
        if len(w.shape) != 2:
            raise ValueError(f"W12Linear needs a 2-D weight, got shape {w.shape}")
        self.out_features, self.in_features = (int(s) for s in w.shape)
        self.reproducible = reproducible
        for part in PARTS:
            self.register_buffer("w12_" + part, getattr(w, part))
        index = dict(zip(("koff", "kent", "kval"), kernel.escape_index(w)))
        index.update(zip(("tc_koff", "tc_kent", "tc_kval"),
                         kernel.escape_index(w, kernel.TC_IDX_ROWS)))
        index["kernel_hb"] = kernel.kernel_hb(w.hb)
        for name, t in index.items():
            self.register_buffer("w12_" + name, t.to(w.L.device), persistent=False)
        if bias is None:
            self.register_parameter("bias", None)
        else:
            self.bias = nn.Parameter(bias.detach().clone(), requires_grad=False)

    @classmethod
    def from_linear(cls, lin: nn.Linear, threshold: float = ESC_THRESHOLD,
                    reproducible: bool = False) -> "W12Linear | None":
        """W12Linear with ``lin``'s weight and bias on ``lin``'s device, or None when the weight
        is not bf16 or its escape rate stays above ``threshold`` (see ``format.encode_auto``).
        Encodes on the weight's device (a 27B model converts in seconds on a GPU)."""
        if lin.weight.dtype != torch.bfloat16:
            return None
        w, _ = encode_auto(lin.weight.detach(), threshold)
        if w is None:
            return None
        return cls(w, lin.bias, reproducible).to(lin.weight.device)

    def w12_tensor(self) -> W12Tensor:
        return W12Tensor((self.out_features, self.in_features), self.w12_L, self.w12_H, self.w12_hb,
                         self.w12_esc_off, self.w12_esc)

    def planes(self) -> kernel.W12Planes:
        common = dict(N=self.out_features, K=self.in_features, L=self.w12_L, H=self.w12_H,
                      hb=self.w12_kernel_hb)
        tc = kernel.W12Planes(**common, koff=self.w12_tc_koff, kent=self.w12_tc_kent,
                              kval=self.w12_tc_kval, idx_rows=kernel.TC_IDX_ROWS)
        return kernel.W12Planes(**common, koff=self.w12_koff, kent=self.w12_kent,
                                kval=self.w12_kval, tc=tc)

    @property
    def per_row(self) -> bool:
        return self.w12_hb.numel() > 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu":
            return F.linear(x, decode(self.w12_tensor()), self.bias)
        if not x.is_cuda:
            raise RuntimeError(f"W12Linear runs on CPU (reference) or CUDA, got {x.device}")
        if not kernel.HAS_TRITON:
            raise RuntimeError("W12Linear on CUDA needs Triton (pip install triton); the only "
                               "other path is the CPU reference (input on CPU)")
        y = kernel.w12_matmul(x.reshape(-1, self.in_features), self.planes(),
                              reproducible=self.reproducible)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, base={'row' if self.per_row else 'tensor'}, "
                f"escapes={self.w12_esc.numel()}, reproducible={self.reproducible}")


def convert_model_linears(model: nn.Module, threshold: float = ESC_THRESHOLD,
                          reproducible: bool = False) -> dict:
    """Replace, in place, every bf16 ``nn.Linear`` of ``model`` by a ``W12Linear``.

    Kept as they are: embeddings and norms (by name, as ``convert.should_code``), non-bf16
    layers, layers whose weight is shared with another parameter (tied lm_head: converting it
    would store the embedding twice), and weights whose escape rate stays above ``threshold``.
    Returns ``{"converted": n, "kept": n, "layers": {name: "w12-tensor" | "w12-row" | reason}}``.
    """
    owners: dict = {}
    for pname, p in model.named_parameters(remove_duplicate=False):
        owners.setdefault(id(p), []).append(pname)
    layers = {}
    targets = []
    for mname, module in model.named_modules():
        for cname, child in module.named_children():
            if not isinstance(child, nn.Linear):
                continue
            name = f"{mname}.{cname}" if mname else cname
            if len(owners.get(id(child.weight), ())) > 1:
                layers[name] = "kept: tied weight"
            elif not should_code(name + ".weight", child.weight):
                layers[name] = "kept: not a linear weight (embedding/norm name or not bf16)"
            else:
                targets.append((module, cname, name, child))
    while targets:  # popped, so each bf16 weight is freed once its layer is replaced
        module, cname, name, child = targets.pop(0)
        new = W12Linear.from_linear(child, threshold, reproducible)
        del child
        if new is None:
            layers[name] = "kept: escape rate above threshold"
            continue
        setattr(module, cname, new)
        layers[name] = "w12-row" if new.per_row else "w12-tensor"
    n_conv = sum(1 for v in layers.values() if v.startswith("w12"))
    return {"converted": n_conv, "kept": len(layers) - n_conv, "layers": layers}
