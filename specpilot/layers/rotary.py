"""Rotary position embedding (HF "rotate_half" layout), frequencies from the model config.

The cos/sin table is computed once for every position up to `max_positions` in fp32 exactly as
transformers computes it on the fly (position * inv_freq in fp32, then cos/sin, times the
attention scaling), so lookups are bit-identical to the reference.
RoPE variants come from transformers' ROPE_INIT_FUNCTIONS; variants whose frequencies depend on
the running sequence length ("dynamic", "longrope") are refused rather than approximated.
On CUDA, forward runs the Triton kernel of kernels/rope.py (same switch as the norms:
layers.norm.USE_TRITON), with the attention's per-head q / k norms in the same launch when it is
given them (FUSE_QK_NORM); rotate is always the torch reference.
"""

import torch
from torch import nn
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from specpilot.layers.norm import triton_kernels

_LENGTH_DEPENDENT = ("dynamic", "longrope")
FUSE_QK_NORM = True  # the q / k head norms inside the RoPE launch (False: their own; benchmarks)


def rotary_dim(hf_config, head_dim: int) -> int:
    """Rotated channels per head: head_dim * partial_rotary_factor (Qwen3.5: 0.25)."""
    params = getattr(hf_config, "rope_parameters", None) or {}
    factor = params.get("partial_rotary_factor", getattr(hf_config, "partial_rotary_factor", 1.0))
    return int(head_dim * factor)


def rope_frequencies(hf_config, head_dim: int,
                     partial: bool = True) -> tuple[torch.Tensor, float]:
    """Returns (inv_freq [rotary_dim/2] fp32, attention_scaling). partial=False: the family's
    HF default RoPE rotates the whole head whatever partial_rotary_factor says (Llama, Qwen3,
    Muse-Glimmer), and HF's other RoPE types cannot run a partial factor there: refused."""
    params = getattr(hf_config, "rope_parameters", None) or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    if not partial and rope_type not in ("default", "proportional") \
            and rotary_dim(hf_config, head_dim) != head_dim:
        raise ValueError(f"partial_rotary_factor with RoPE type {rope_type!r} is not supported "
                         "by this architecture")
    if rope_type == "default":
        base = params.get("rope_theta", getattr(hf_config, "rope_theta", 10000.0))
        dim = rotary_dim(hf_config, head_dim) if partial else head_dim
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        return inv_freq, 1.0
    if rope_type in _LENGTH_DEPENDENT:
        raise ValueError(f"RoPE type {rope_type!r} depends on the sequence length; not supported")
    if rope_type not in ROPE_INIT_FUNCTIONS:
        raise ValueError(f"unknown RoPE type {rope_type!r}")
    inv_freq, scaling = ROPE_INIT_FUNCTIONS[rope_type](hf_config, torch.device("cpu"))
    return inv_freq.float(), float(scaling)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, hf_config, head_dim: int, max_positions: int, partial: bool = True):
        super().__init__()
        inv_freq, scaling = rope_frequencies(hf_config, head_dim, partial)
        freqs = torch.arange(max_positions, dtype=torch.int64).float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)  # [max_positions, rotary_dim]
        self.rotary_dim = emb.shape[-1]  # < head_dim: the remaining channels pass through
        self.register_buffer("cos_table", emb.cos() * scaling, persistent=False)
        self.register_buffer("sin_table", emb.sin() * scaling, persistent=False)

    def rotate(self, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """positions [T]; x [T, heads, D] -> rotated x, same dtype."""
        cos = self.cos_table[positions].to(x.dtype)[:, None, :]
        sin = self.sin_table[positions].to(x.dtype)[:, None, :]
        if self.rotary_dim == x.shape[-1]:
            return x * cos + rotate_half(x) * sin
        rot, rest = x[..., :self.rotary_dim], x[..., self.rotary_dim:]
        return torch.cat([rot * cos + rotate_half(rot) * sin, rest], dim=-1)

    def fuses_norms(self, x: torch.Tensor) -> bool:
        """Whether forward runs the q / k norms it is given inside its launch (for inputs on
        x's device and autograd state): the Triton path with FUSE_QK_NORM."""
        return FUSE_QK_NORM and triton_kernels(x, "rope") is not None

    def forward(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                q_scale: float | None = None, q_norm: nn.Module | None = None,
                k_norm: nn.Module | None = None):
        """positions [T]; q [T, Hq, D]; k [T, Hkv, D] -> rotated (q, k), same dtypes; q_scale:
        q is first `q * q_scale` (in q's dtype); q_norm / k_norm: per-head norm modules applied
        to q / k before that (their forward). On CUDA (layers.norm.USE_TRITON) one Triton launch
        scales and rotates both, bit-identical to this torch code (kernels/rope.py); with
        FUSE_QK_NORM the norms run in that launch too (each norm module's head_spec), with their
        own launch's numerics (the sums of squares in another order: 16-bit results at most an
        ulp apart, now and then)."""
        kernels = triton_kernels(q, "rope")
        if kernels is not None and FUSE_QK_NORM and (q_norm is not None or k_norm is not None):
            specs = [None if n is None else n.head_spec(x.dtype)
                     for n, x in ((q_norm, q), (k_norm, k))]
            if all(sp is not None or n is None for n, sp in zip((q_norm, k_norm), specs)):
                return kernels.rope(positions, q, k, self.cos_table, self.sin_table, q_scale,
                                    *specs)
        if q_norm is not None:
            q = q_norm(q)
        if k_norm is not None:
            k = k_norm(k)
        if kernels is not None:
            return kernels.rope(positions, q, k, self.cos_table, self.sin_table, q_scale)
        if q_scale is not None:
            q = q * q_scale
        return self.rotate(positions, q), self.rotate(positions, k)
