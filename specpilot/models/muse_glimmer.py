"""Muse-Glimmer text tower (`muse_glimmer`): MuseGlimmerForConditionalGeneration / ForCausalLM.

Architecture (transformers `modeling_muse_glimmer.py`, text part), per decoder layer i:
  x = x + post_attention_layernorm(attn(input_layernorm(x)))        sandwich norms, (1 + w) gain,
  x = x + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)))  post eps = post_norm_eps
  attn: q, k = qk_norm(q) * qk_scale_factor, qk_norm(k)  (one weightless per-head RMSNorm)
        RoPE (global rope_theta) unless layer_rope_theta[i] == 0 (NoPE), scale head_dim ** -0.5,
        sliding window `sliding_window` on "sliding_attention" layers, none on "full_attention";
        output = o_proj(attn * sigmoid(gate_proj(layer input)))
  embeddings: weightless RMSNorm of the raw table rows; final `norm` has a plain weight (no +1).
  logits = cap * tanh(lm_head(h) * output_multiplier / cap), cap = final_logit_softcapping.

Checkpoint layouts (parameter names equal the checkpoint's):
  config with `text_config` (model_type muse_glimmer): text tower under `model.language_model.`,
      `lm_head.weight` at the top; vision tensors (`model.vision_tower.`, `model.vision_adapter.`,
      `model.vision_projection.`) are listed in `ignored_checkpoint_prefixes`. As in HF, image
      and video placeholder ids are embedded as token 0. Tying follows the top-level config.
  flat text config (model_type muse_glimmer_text): text tower under `model.`, no vision.

Contract (as llama.py): forward(input_ids [T], positions [T], backend, capture) -> (hidden [T, H]
after the final norm, aux [T, len(capture) * H] or None), aux = HF hidden_states[id + 1] (the
last layer's entry is after the final norm, as HF reports it); compute_logits(hidden [N, H]) ->
fp32 [N, V]; get_input_embeddings() -> the raw table (no embed norm); kv_cache_spec().
"""

from __future__ import annotations

import torch
from torch import nn

from specpilot.layers.fused import project
from specpilot.layers.norm import (FusedAddNorm, PendingNorm, ZeroCenteredRMSNorm,
                                   triton_kernels)
from specpilot.layers.rotary import RotaryEmbedding
from specpilot.models.llama import GatedMLP, run_layers
from specpilot.models.registry import register

VISION_PREFIXES = ("model.vision_tower.", "model.vision_adapter.", "model.vision_projection.")
LAYER_TYPES = ("sliding_attention", "full_attention")


class MuseRMSNorm(FusedAddNorm):
    """HF MuseGlimmerRMSNorm: x * (mean(x^2) + eps) ** -0.5 in fp32, times an optional plain
    weight in fp32, cast back to x's dtype. [..., dim] -> [..., dim]."""

    def __init__(self, dim: int | None, eps: float, with_scale: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if with_scale else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kernels = triton_kernels(x)
        if kernels is not None:
            # One launch (kernels/norm.py). It takes rsqrt(m) where this takes pow(m, -0.5) (the
            # two differ by an ulp at most in fp32) and sums the squares in another order: fp32
            # outputs agree to a few ulp, 16-bit ones now and then land one ulp apart.
            return kernels.rms_norm_fp32_weight(x, self.weight, self.eps)
        x32 = x.float()
        out = x32 * torch.pow(x32.pow(2).mean(-1, keepdim=True) + self.eps, -0.5)
        if self.weight is not None:
            out = out * self.weight.float()
        return out.type_as(x)

    def _fused_add(self, kernels, x, delta, pre=None):
        return kernels.rms_norm_fp32_weight(x, self.weight, self.eps, residual=delta, pre=pre)

    def _pre_spec(self, kernels):
        return kernels.pre_norm(self.weight, self.eps)


class MuseAttention(nn.Module):
    FUSED = {"qkvg_proj": ("q_proj", "k_proj", "v_proj", "gate_proj")}

    def __init__(self, c, layer_id: int, rotary: RotaryEmbedding | None, window: int | None):
        super().__init__()
        self.layer_id = layer_id
        self.num_heads, self.num_kv_heads = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_attention_heads {self.num_heads} is not a multiple of "
                             f"num_key_value_heads {self.num_kv_heads}")
        h, d, bias = c.hidden_size, self.head_dim, bool(getattr(c, "attention_bias", False))
        self.q_proj = nn.Linear(h, self.num_heads * d, bias=bias)
        self.k_proj = nn.Linear(h, self.num_kv_heads * d, bias=bias)
        self.v_proj = nn.Linear(h, self.num_kv_heads * d, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * d, h, bias=bias)
        self.gate_proj = nn.Linear(h, self.num_heads * d, bias=False)
        self.qk_norm = MuseRMSNorm(None, c.rms_norm_eps, with_scale=False)  # shared by q and k
        self.qk_scale_factor = float(c.qk_scale_factor)
        self.scaling = d ** -0.5  # HF: the query gain comes on top of the usual scale
        self.window = window
        self.rotary = [rotary] if rotary is not None else None  # shared module, not a child

    def forward(self, positions: torch.Tensor, x: torch.Tensor, backend) -> torch.Tensor:
        """positions [T]; x [T, hidden] (the normed layer input) -> [T, hidden]."""
        t, hq, hkv, d = x.shape[0], self.num_heads, self.num_kv_heads, self.head_dim
        rot = self.rotary[0] if self.rotary is not None else None
        if rot is not None and rot.fuses_norms(x):
            # qk_norm, qk_scale_factor and RoPE in one launch (layers/rotary.py)
            q, k, v, gate = project(self, "qkvg_proj", x)
            q, k = rot(positions, q.view(t, hq, d), k.view(t, hkv, d),
                       q_scale=self.qk_scale_factor, q_norm=self.qk_norm, k_norm=self.qk_norm)
        else:
            sizes = getattr(self, "fused_sizes", {}).get("qkvg_proj")
            if sizes is not None:
                # q and k are adjacent columns of the fused output: one norm launch over the
                # [T, Hq + Hkv, D] view of both (read in place; each head row is normalised on
                # its own, so the values are those of separate q and k norms)
                qk, v, gate = self.qkvg_proj(x).split([sizes[0] + sizes[1], *sizes[2:]], dim=-1)
                q, k = self.qk_norm(qk.view(t, hq + hkv, d)).split([hq, hkv], dim=1)
            else:
                q, k, v, gate = project(self, "qkvg_proj", x)
                q = self.qk_norm(q.view(t, hq, d))
                k = self.qk_norm(k.view(t, hkv, d))
            # qk_scale_factor: after the norm, before RoPE, in the model dtype (as HF); folded
            # into the RoPE launch (the same single rounding of q * s)
            if rot is not None:
                q, k = rot(positions, q, k, q_scale=self.qk_scale_factor)
            else:
                q = q * self.qk_scale_factor
        v = v.view(t, hkv, d)
        # o * sigmoid(gate) [T, Hq, D], the gate multiplied in by the backend (on the Triton path
        # inside the attention launch)
        o = backend.forward(q, k, v, self.layer_id, self.scaling, self.window,
                            gate=gate.view(t, hq, d))
        return self.o_proj(o.reshape(t, hq * d))


class MuseDecoderLayer(nn.Module):
    def __init__(self, c, layer_id: int, rotary: RotaryEmbedding | None, window: int | None):
        super().__init__()
        h = c.hidden_size
        self.self_attn = MuseAttention(c, layer_id, rotary, window)
        self.mlp = GatedMLP(h, c.intermediate_size, c.hidden_activation, bias=False)
        self.input_layernorm = ZeroCenteredRMSNorm(h, c.rms_norm_eps)
        self.post_attention_layernorm = ZeroCenteredRMSNorm(h, c.post_norm_eps)
        self.pre_feedforward_layernorm = ZeroCenteredRMSNorm(h, c.rms_norm_eps)
        self.post_feedforward_layernorm = ZeroCenteredRMSNorm(h, c.post_norm_eps)

    def forward(self, positions, x, backend, delta=None):
        """(x, delta) -> (x', delta') as llama's DecoderLayer, x [T, H]: each residual add, and
        the post-norm of its branch (a PendingNorm), is left to the pre-norm after it
        (forward_add: one launch for post-norm, add and pre-norm on the Triton path)."""
        h, x = self.input_layernorm.forward_add(x, delta)
        a = PendingNorm(self.self_attn(positions, h, backend), self.post_attention_layernorm)
        h, x = self.pre_feedforward_layernorm.forward_add(x, a)
        return x, PendingNorm(self.mlp(h), self.post_feedforward_layernorm)


def layer_plan(c) -> list[tuple[bool, int | None]]:
    """Per layer (uses RoPE, sliding window or None), checked against what HF computes.

    HF applies the one global `rope_parameters["rope_theta"]` on every layer whose
    `layer_rope_theta` is non-zero; a different non-zero per-layer theta would be ignored by HF,
    so it is refused here rather than guessed."""
    types = list(c.layer_types)
    thetas = list(c.layer_rope_theta)
    n = c.num_hidden_layers
    if len(types) != n or len(thetas) != n:
        raise ValueError(f"layer_types ({len(types)}) / layer_rope_theta ({len(thetas)}) do not "
                         f"have num_hidden_layers = {n} entries")
    params = c.rope_parameters or {}
    if "rope_type" not in params:
        raise ValueError(f"rope_parameters {params!r}: expected one flat entry with rope_type "
                         "(per-layer-type RoPE parameters are not what HF Muse-Glimmer reads)")
    base = params.get("rope_theta")
    plan = []
    for i, (t, theta) in enumerate(zip(types, thetas)):
        if t not in LAYER_TYPES:
            raise ValueError(f"layer {i}: layer type {t!r} not supported ({LAYER_TYPES})")
        if theta and float(theta) != float(base):
            raise ValueError(f"layer {i}: layer_rope_theta {theta} differs from rope_theta {base}; "
                             "transformers would silently use rope_theta, refused")
        window = c.sliding_window if t == "sliding_attention" else None
        plan.append((bool(theta), int(window) if window else None))
    return plan


class MuseTextModel(nn.Module):
    def __init__(self, c, max_positions: int):
        super().__init__()
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        plan = layer_plan(c)
        self.rotary_emb = RotaryEmbedding(c, head_dim, max_positions, partial=False)
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.embed_norm = MuseRMSNorm(None, c.rms_norm_eps, with_scale=False)
        self.layers = nn.ModuleList(
            MuseDecoderLayer(c, i, self.rotary_emb if rope else None, window)
            for i, (rope, window) in enumerate(plan))
        self.norm = MuseRMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, input_ids, positions, backend, capture: tuple[int, ...] = ()):
        """Returns (hidden [T, H] after the final norm, aux [T, len(capture) * H] or None)."""
        x = self.embed_norm(self.embed_tokens(input_ids))  # HF hidden_states[0]
        return run_layers(self.layers, self.norm, x, positions, backend, capture)


class _MultimodalHolder(nn.Module):
    """`model.` of the multimodal checkpoint: only its `language_model` is built."""

    def __init__(self, text: MuseTextModel):
        super().__init__()
        self.language_model = text

    @property
    def layers(self) -> nn.ModuleList:
        return self.language_model.layers


class MuseGlimmerForCausalLM(nn.Module):
    def __init__(self, hf_config, max_positions: int):
        super().__init__()
        nested = getattr(hf_config, "text_config", None) is not None
        c = hf_config.text_config if nested else hf_config
        self.config = c  # the text config (num_hidden_layers, hidden_size, vocab_size, ...)
        text = MuseTextModel(c, max_positions)
        self.model = _MultimodalHolder(text) if nested else text
        self.ignored_checkpoint_prefixes = VISION_PREFIXES if nested else ()
        # Placeholder ids HF maps to token 0 before embedding (multimodal form only).
        self.mm_token_ids = tuple(int(t) for t in (getattr(hf_config, "image_token_id", None),
                                                   getattr(hf_config, "video_token_id", None))
                                  if nested and t is not None)
        self.output_multiplier = float(c.output_multiplier)
        cap = getattr(c, "final_logit_softcapping", None)
        self.softcap = float(cap) if cap else None
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        if getattr(hf_config, "tie_word_embeddings", False):  # HF reads the top-level config
            self.lm_head.weight = text.embed_tokens.weight

    @property
    def text(self) -> MuseTextModel:
        m = self.model
        return m.language_model if isinstance(m, _MultimodalHolder) else m

    def forward(self, input_ids, positions, backend, capture: tuple[int, ...] = ()):
        for t in self.mm_token_ids:
            input_ids = input_ids.masked_fill(input_ids == t, 0)
        return self.text(input_ids, positions, backend, capture)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.text.embed_tokens

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [N, H] -> fp32 [N, V]: cap * tanh(lm_head(hidden) * multiplier / cap)."""
        z = self.lm_head(hidden).float() * self.output_multiplier
        if self.softcap is None:
            return z
        return torch.tanh(z / self.softcap) * self.softcap

    def kv_cache_spec(self) -> tuple[int, int, int]:
        """(layers holding KV, KV heads, head dim): every layer, sliding ones included."""
        a = self.text.layers[0].self_attn
        return len(self.text.layers), a.num_kv_heads, a.head_dim


register("MuseGlimmerForConditionalGeneration", MuseGlimmerForCausalLM)
register("MuseGlimmerForCausalLM", MuseGlimmerForCausalLM)
