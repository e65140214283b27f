"""Qwen3.5 / Qwen3.6 / Qwen3.8 hybrid targets (`qwen3_5`): Gated DeltaNet + gated attention.

Layers follow config.layer_types: "linear_attention" (Gated DeltaNet: in_proj_qkv -> short causal
conv1d + SiLU -> L2-normed q/k, per-head decay g = -exp(A_log) softplus(a + dt_bias) and
beta = sigmoid(b) -> delta rule -> gated RMSNorm with z -> out_proj) or "full_attention" (q_proj
yields query and an output gate per head, zero-centred q/k norms, partial RoPE, sigmoid gate
before o_proj). Norms are (1 + w) RMSNorms. Text-only M-RoPE positions are equal in all three
sections, which reduces to plain (partial) RoPE.

Recurrent state lives in the engine's RecurrentStatePool; the layer reaches it through
`backend.recurrent`: a RecurrentBatch (torch reference, a loop over requests) or a
TensorRecurrentBatch (the conv and recurrence kernels, CUDA-graph safe). Attention layers use
KV-cache indices 0..n_attn-1.
Names equal Qwen3_5ForCausalLM's (`model.layers.N.linear_attn.A_log`) or, for the
multimodal Qwen3_5ForConditionalGeneration, `model.language_model.*` (vision tower and MTP
tensors are skipped by name).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from specpilot.layers.fused import project
from specpilot.layers.gdn import causal_conv, delta_rule, l2norm
from specpilot.layers.norm import GatedRMSNorm, ZeroCenteredRMSNorm
from specpilot.layers.rotary import RotaryEmbedding
from specpilot.models.llama import GatedMLP, run_layers
from specpilot.models.registry import register


class GatedDeltaNet(nn.Module):
    FUSED = {"in_proj": ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")}

    def __init__(self, c, state_index: int):
        super().__init__()
        self.state_index = state_index
        self.hk, self.hv = c.linear_num_key_heads, c.linear_num_value_heads
        self.dk, self.dv = c.linear_key_head_dim, c.linear_value_head_dim
        self.key_dim, self.value_dim = self.hk * self.dk, self.hv * self.dv
        self.conv_dim = 2 * self.key_dim + self.value_dim
        self.kernel = c.linear_conv_kernel_dim
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, self.kernel, groups=self.conv_dim,
                                bias=False, padding=self.kernel - 1)
        self.dt_bias = nn.Parameter(torch.ones(self.hv))
        self.A_log = nn.Parameter(torch.zeros(self.hv))
        self.norm = GatedRMSNorm(self.dv, c.rms_norm_eps)
        self.out_proj = nn.Linear(self.value_dim, c.hidden_size, bias=False)
        self.in_proj_qkv = nn.Linear(c.hidden_size, self.conv_dim, bias=False)
        self.in_proj_z = nn.Linear(c.hidden_size, self.value_dim, bias=False)
        self.in_proj_b = nn.Linear(c.hidden_size, self.hv, bias=False)
        self.in_proj_a = nn.Linear(c.hidden_size, self.hv, bias=False)

    def forward(self, positions, x, backend):  # x [T, hidden]
        st = backend.recurrent
        mixed, z, b, a = project(self, "in_proj", x)  # mixed [T, C]
        z = z.reshape(-1, self.hv, self.dv)
        weight = self.conv1d.weight[:, 0, :]  # [C, K]
        if getattr(st, "tensorized", False):  # batched ops + the Triton recurrence (gates in it)
            out = st.mix(self.state_index, mixed, weight, a, b, self.dk ** -0.5)  # x.dtype
            # z [T, Hv, Dv] stays a view of the fused projection (the norm reads its rows in
            # place): flattening it to [T * Hv, Dv] would copy it whenever T > 1 (VERIFY)
            o = self.norm(out, z)
            return self.out_proj(o.view(x.shape[0], self.value_dim))
        beta = b.sigmoid().float()  # [T, Hv]
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias)
        out = torch.empty(x.shape[0], self.hv, self.dv, dtype=x.dtype, device=x.device)
        rep = self.hv // self.hk
        for i, (start, ext) in enumerate(backend.row_segments()):
            rows = slice(start, start + ext)
            window, state = st.initial(self.state_index, i)
            y, new_window = causal_conv(window, mixed[rows], weight)
            q, k, v = y.split([self.key_dim, self.key_dim, self.value_dim], dim=-1)
            q = l2norm(q.float().view(ext, self.hk, self.dk)).repeat_interleave(rep, dim=1)
            k = l2norm(k.float().view(ext, self.hk, self.dk)).repeat_interleave(rep, dim=1)
            v = v.float().view(ext, self.hv, self.dv)
            o, new_state = delta_rule(q * self.dk ** -0.5, k, v, g[rows], beta[rows], state)
            st.update(self.state_index, i, new_window, new_state, mixed[rows], k, v, g[rows],
                      beta[rows])
            out[rows] = o.to(x.dtype)
        o = self.norm(out, z)
        return self.out_proj(o.view(x.shape[0], self.value_dim))


class GatedAttention(nn.Module):
    FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj")}

    def __init__(self, c, kv_index: int, rotary: RotaryEmbedding):
        super().__init__()
        self.kv_index = kv_index
        self.num_heads, self.num_kv_heads = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        d, bias = self.head_dim, bool(getattr(c, "attention_bias", False))
        self.q_proj = nn.Linear(c.hidden_size, self.num_heads * d * 2, bias=bias)
        self.k_proj = nn.Linear(c.hidden_size, self.num_kv_heads * d, bias=bias)
        self.v_proj = nn.Linear(c.hidden_size, self.num_kv_heads * d, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * d, c.hidden_size, bias=bias)
        self.q_norm = ZeroCenteredRMSNorm(d, c.rms_norm_eps)
        self.k_norm = ZeroCenteredRMSNorm(d, c.rms_norm_eps)
        self.rotary = [rotary]

    def forward(self, positions, x, backend):
        t, d = x.shape[0], self.head_dim
        q, k, v = project(self, "qkv_proj", x)
        q, gate = q.reshape(t, self.num_heads, 2 * d).chunk(2, dim=-1)
        k = k.reshape(t, self.num_kv_heads, d)
        v = v.reshape(t, self.num_kv_heads, d)
        q, k = self.rotary[0](positions, q, k, q_norm=self.q_norm, k_norm=self.k_norm)
        # o * sigmoid(gate), the gate multiplied in by the backend (inside the Triton launch)
        o = backend.forward(q, k, v, self.kv_index, d ** -0.5, gate=gate)
        return self.o_proj(o.reshape(t, -1))


class HybridLayer(nn.Module):
    def __init__(self, c, layer_type: str, index: int, rotary):
        super().__init__()
        if layer_type == "linear_attention":
            self.linear_attn = GatedDeltaNet(c, index)
        elif layer_type == "full_attention":
            self.self_attn = GatedAttention(c, index, rotary)
        else:
            raise ValueError(f"unknown qwen3_5 layer type {layer_type!r}")
        self._mixer = [getattr(self, "linear_attn", None) or self.self_attn]  # not a 2nd name
        self.mlp = GatedMLP(c.hidden_size, c.intermediate_size, c.hidden_act, False)
        self.input_layernorm = ZeroCenteredRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = ZeroCenteredRMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, positions, x, backend, delta=None):
        """(x, delta) -> (x', delta') as llama's DecoderLayer: residual adds fused into norms."""
        h, x = self.input_layernorm.forward_add(x, delta)
        h, x = self.post_attention_layernorm.forward_add(x, self._mixer[0](positions, h, backend))
        return x, self.mlp(h)


class HybridTextModel(nn.Module):
    def __init__(self, c, max_positions: int):
        super().__init__()
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        self.rotary_emb = RotaryEmbedding(c, head_dim, max_positions)
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        counts = {"linear_attention": 0, "full_attention": 0}
        layers = []
        for t in c.layer_types[:c.num_hidden_layers]:
            layers.append(HybridLayer(c, t, counts.get(t, 0), self.rotary_emb))
            counts[t] = counts.get(t, 0) + 1
        self.layers = nn.ModuleList(layers)
        self.norm = ZeroCenteredRMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, input_ids, positions, backend, capture=()):
        return run_layers(self.layers, self.norm, self.embed_tokens(input_ids), positions, backend,
                          capture)


class Qwen3_5ForCausalLM(nn.Module):
    ignored_checkpoint_prefixes = ("mtp.", "model.visual.")

    def __init__(self, hf_config, max_positions: int):
        super().__init__()
        c = getattr(hf_config, "text_config", None) or hf_config
        self.config = c
        self.model = self._wrap(HybridTextModel(c, max_positions))
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if getattr(hf_config, "tie_word_embeddings", False):
            self.lm_head.weight = self.text.embed_tokens.weight

    def _wrap(self, text):
        return text

    @property
    def text(self) -> HybridTextModel:
        return self.model

    def forward(self, input_ids, positions, backend, capture=()):
        return self.text(input_ids, positions, backend, capture)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.text.embed_tokens

    def compute_logits(self, hidden):
        return self.lm_head(hidden).float()

    def kv_cache_spec(self) -> tuple[int, int, int]:
        """(attention layers holding KV, KV heads, head dim)."""
        attn = [lyr.self_attn for lyr in self.text.layers if hasattr(lyr, "self_attn")]
        return len(attn), attn[0].num_kv_heads, attn[0].head_dim

    def recurrent_state_spec(self) -> dict:
        gdn = [lyr.linear_attn for lyr in self.text.layers if hasattr(lyr, "linear_attn")]
        g = gdn[0]
        return dict(num_layers=len(gdn), conv_dim=g.conv_dim, conv_kernel=g.kernel,
                    heads=g.hv, dk=g.dk, dv=g.dv)

    def recurrent_gate_params(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(A_log, dt_bias) of every Gated DeltaNet layer, stacked [L, Hv]."""
        gdn = [lyr.linear_attn for lyr in self.text.layers if hasattr(lyr, "linear_attn")]
        return (torch.stack([g.A_log.detach().float() for g in gdn]),
                torch.stack([g.dt_bias.detach().float() for g in gdn]))


class Qwen3_5ForConditionalGeneration(Qwen3_5ForCausalLM):
    """The multimodal checkpoint's text tower: parameters under `model.language_model.`."""

    def _wrap(self, text):
        holder = nn.Module()
        holder.language_model = text
        return holder

    @property
    def text(self) -> HybridTextModel:
        return self.model.language_model


register("Qwen3_5ForCausalLM", Qwen3_5ForCausalLM)
register("Qwen3_5ForConditionalGeneration", Qwen3_5ForConditionalGeneration)
