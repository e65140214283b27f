"""LlamaForCausalLM and Qwen3ForCausalLM (Llama plus per-head q/k RMSNorm).

Parameter names equal the Hugging Face checkpoint's (`model.layers.N.self_attn.q_proj.weight`)
when loading; after loading, q/k/v and gate/up are fused into one GEMM each (layers/fused.py).
forward(input_ids [T], positions [T], backend, capture) -> (hidden [T, H], aux features or None);
the runner picks the rows that need logits and calls compute_logits(hidden [N, H]) -> [N, V] fp32.
"""

import torch
from torch import nn

from specpilot.layers.attention import SelfAttention
from specpilot.layers.fused import project
from specpilot.layers.norm import RMSNorm, resolve, triton_kernels
from specpilot.layers.rotary import RotaryEmbedding
from specpilot.models.registry import register


class GatedMLP(nn.Module):
    FUSED = {"gate_up_proj": ("gate_proj", "up_proj")}

    def __init__(self, hidden: int, intermediate: int, act: str, bias: bool):
        super().__init__()
        if act != "silu":
            raise ValueError(f"hidden_act {act!r} is not supported (only 'silu')")
        self.gate_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = project(self, "gate_up_proj", x)
        kernels = triton_kernels(gate)
        if kernels is not None:
            return self.down_proj(kernels.silu_mul(gate, up))
        return self.down_proj(nn.functional.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, c, layer_id: int, rotary: RotaryEmbedding, qk_norm: bool):
        super().__init__()
        self.self_attn = SelfAttention(c, layer_id, rotary, qk_norm)
        self.mlp = GatedMLP(c.hidden_size, c.intermediate_size, c.hidden_act,
                            bool(getattr(c, "mlp_bias", False)))
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, positions, x, backend, delta=None):
        """The layer input is x + delta (delta None: x); returns (x', delta'), the output being
        x' + delta'. Each residual add is left to the norm after it (forward_add), where the
        Triton path fuses it into the norm kernel; run_layers adds the last delta in the final
        norm."""
        h, x = self.input_layernorm.forward_add(x, delta)
        h, x = self.post_attention_layernorm.forward_add(x, self.self_attn(positions, h, backend))
        return x, self.mlp(h)


class DecoderModel(nn.Module):
    def __init__(self, c, max_positions: int, qk_norm: bool):
        super().__init__()
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        self.rotary_emb = RotaryEmbedding(c, head_dim, max_positions, partial=False)
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(
            DecoderLayer(c, i, self.rotary_emb, qk_norm) for i in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, input_ids, positions, backend, capture: tuple[int, ...] = ()):
        """Returns (hidden [T, H] after the final norm, aux [T, len(capture) * H] or None)."""
        return run_layers(self.layers, self.norm, self.embed_tokens(input_ids), positions, backend,
                          capture)


def run_layers(layers, norm, x, positions, backend, capture: tuple[int, ...]):
    """The decoder stack with feature capture, shared by every target family.

    Layers pass (x, delta) on, their output being x + delta (see DecoderLayer.forward): the add
    happens in the next layer's first norm, or in the final norm, fused on the Triton path.
    Returns (norm(x) after the last layer, aux [T, len(capture) * H] or None): aux concatenates
    the outputs of the layers named in `capture` (HF `hidden_states[id + 1]`; for the last layer
    HF reports it after the final norm, and so do we). A captured layer's output is added up
    where it is captured (one unfused add each).
    """
    feats, delta, last = {}, None, len(layers) - 1
    for i, layer in enumerate(layers):
        x, delta = layer(positions, x, backend, delta)
        if i in capture and i != last:
            x, delta = x + resolve(delta), None
            feats[i] = x
    h, _ = norm.forward_add(x, delta)
    if not capture:
        return h, None
    return h, torch.cat([h if i == last else feats[i] for i in capture], dim=-1)


class LlamaForCausalLM(nn.Module):
    qk_norm = False

    def __init__(self, hf_config, max_positions: int):
        super().__init__()
        self.config = hf_config
        self.model = DecoderModel(hf_config, max_positions, self.qk_norm)
        self.lm_head = nn.Linear(hf_config.hidden_size, hf_config.vocab_size, bias=False)
        if getattr(hf_config, "tie_word_embeddings", False):
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids, positions, backend, capture: tuple[int, ...] = ()):
        return self.model(input_ids, positions, backend, capture)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden).float()

    def kv_cache_spec(self) -> tuple[int, int, int]:
        """(layers holding KV, KV heads, head dim)."""
        a = self.model.layers[0].self_attn
        return len(self.model.layers), a.num_kv_heads, a.head_dim


class Qwen3ForCausalLM(LlamaForCausalLM):
    qk_norm = True

    def __init__(self, hf_config, max_positions: int):
        if getattr(hf_config, "use_sliding_window", False):
            raise ValueError("Qwen3 with use_sliding_window=true is not supported yet")
        super().__init__(hf_config, max_positions)


register("LlamaForCausalLM", LlamaForCausalLM)
register("Qwen3ForCausalLM", Qwen3ForCausalLM)
