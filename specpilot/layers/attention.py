"""Attention front end: projections, optional per-head q/k norm, RoPE, then the engine's backend.

The model knows nothing of requests or KV pages. It hands (q, k, v) of the new rows to
`backend.forward(q, k, v, layer_id)`, an object the engine prepared for this batch, which stores
k/v in the KV cache and attends over each request's cached context plus its new rows.
"""

import torch
from torch import nn

from specpilot.layers.fused import project
from specpilot.layers.norm import RMSNorm
from specpilot.layers.rotary import RotaryEmbedding


class SelfAttention(nn.Module):
    FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj")}

    def __init__(self, hf_config, layer_id: int, rotary: RotaryEmbedding, qk_norm: bool):
        super().__init__()
        c = hf_config
        self.layer_id = layer_id
        self.num_heads = c.num_attention_heads
        self.num_kv_heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_attention_heads {self.num_heads} is not a multiple of "
                             f"num_key_value_heads {self.num_kv_heads}")
        bias = bool(getattr(c, "attention_bias", False))
        self.q_proj = nn.Linear(c.hidden_size, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(c.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(c.hidden_size, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, c.hidden_size, bias=bias)
        if qk_norm:
            self.q_norm = RMSNorm(self.head_dim, c.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, c.rms_norm_eps)
        self.qk_norm = qk_norm
        self.rotary = [rotary]  # shared module, kept out of this module's parameters/buffers
        self.scaling = self.head_dim ** -0.5

    def forward(self, positions: torch.Tensor, x: torch.Tensor, backend) -> torch.Tensor:
        """positions [T]; x [T, hidden] -> [T, hidden]."""
        t = x.shape[0]
        q, k, v = project(self, "qkv_proj", x)
        q = q.view(t, self.num_heads, self.head_dim)
        k = k.view(t, self.num_kv_heads, self.head_dim)
        v = v.view(t, self.num_kv_heads, self.head_dim)
        if self.qk_norm:  # the norms inside the RoPE launch on the Triton path
            q, k = self.rotary[0](positions, q, k, q_norm=self.q_norm, k_norm=self.k_norm)
        else:
            q, k = self.rotary[0](positions, q, k)
        o = backend.forward(q, k, v, self.layer_id, self.scaling)  # [T, Hq, D]
        return self.o_proj(o.reshape(t, self.num_heads * self.head_dim))
