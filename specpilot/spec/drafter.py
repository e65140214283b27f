"""The parallel block drafter (DFlash backbone, DFlash2 convs, DSpark/DFlash2 heads attached).

Parameter names (before `fuse()`) equal the public checkpoints' (`fc.weight`,
`layers.0.self_attn.q_proj.weight`, `layers.0.attention_conv.base_kernel`, `candidate_selector.*`,
`markov_head.*`, ...). The drafter has no embedding or LM head: `bind_target` shares the
target's by reference.

Two entry points per step, both through a DraftAttentionBackend:
  store_context(feats [N, n*H_t], positions [N], backend)  project committed target features
      (fc -> hidden_norm -> each layer's k_proj/k_norm/RoPE and v_proj) into the draft KV;
  forward(block_ids [R, Bd], positions [R, Bd], backend) -> hidden [R, Bd, H] after `norm`.

Inference layout (`fuse()`, run by draft_loader after the weights are loaded; training keeps the
checkpoint's separate linears, which `project` falls back to):
  per layer  self_attn.q_proj                  [Hq*D, H]    (as loaded)
             self_attn.kv_proj                 RowSlice: rows [2*i*Hkv*D, 2*(i+1)*Hkv*D) of
                                               context_kv_proj, i.e. [k_proj; v_proj]
             mlp.gate_up_proj                  [2*I, H]     ([gate_proj; up_proj], fused.py)
  drafter    context_kv_proj                   [L*2*Hkv*D, H] = [k_0; v_0; k_1; v_1; ...]
Every layer's context K/V reads the same ctx, so the store runs ONE GEMM for all L layers (was
2L); the block pass runs q and kv per layer (2 GEMMs, was 3) plus gate_up (1, was 2). q stays
apart because a layer's rows cannot sit next to both its own q and the other layers' k/v; the
kv rows live only in context_kv_proj (no weight stored twice). With --weight-format w12 the
context fusion is skipped (fuse(context_kv=False): a W12 layer cannot be row-sliced), so kv_proj
is the layer's own fused [k; v] linear and the store runs L GEMMs.
"""

from __future__ import annotations

import torch
from torch import nn

from specpilot.layers.fused import fuse_projections, fuse_rows, project
from specpilot.layers.norm import RMSNorm, triton_kernels
from specpilot.layers.rotary import RotaryEmbedding
from specpilot.models.llama import GatedMLP
from specpilot.spec.draft_config import DraftConfig
from specpilot.spec.heads import CandidateSelector, ConfidenceHead, MarkovHead


class DynamicConv(nn.Module):
    """DFlash2 grouped dynamic causal conv around one sub-layer.

    Coefficients come from the sub-layer input x [R, Bd, H]: delta = kernel_projection(x) viewed as
    [R, Bd, 2, K, G] (side 0 = input side, 1 = output side; G = H / group_size groups, each
    broadcast over its group_size channels). Side s maps y_t = sum_tap (base[s, tap] +
    delta[t, s, tap]) * y_{t - tap}; taps never reach before the block start.

    forward(x, fn) wraps the sub-layer fn: side 1 of fn(side 0 of x). On CUDA in inference
    (triton_kernels) each side is one launch of kernels/dynconv.py, which reads delta and
    base_kernel directly (same rounding steps as the torch code); training and CPU run
    coefficients() + apply().
    """

    def __init__(self, hidden: int, kernel_size: int, group_size: int):
        super().__init__()
        if hidden % group_size:
            raise ValueError(f"conv_group_size {group_size} does not divide hidden {hidden}")
        self.k, self.g, self.group_size = kernel_size, hidden // group_size, group_size
        self.base_kernel = nn.Parameter(torch.zeros(2, kernel_size, hidden))
        self.kernel_projection = nn.Linear(hidden, 2 * kernel_size * self.g, bias=False)

    def delta(self, x: torch.Tensor) -> torch.Tensor:  # [R, Bd, H] -> [R, Bd, 2, K, G]
        r, b, _ = x.shape
        return self.kernel_projection(x).view(r, b, 2, self.k, self.g)

    def coefficients(self, x: torch.Tensor) -> torch.Tensor:  # [R, Bd, H] -> [R, Bd, 2, K, H]
        delta = self.delta(x).repeat_interleave(self.group_size, dim=-1)
        return self.base_kernel[None, None] + delta

    def apply(self, y: torch.Tensor, coeff: torch.Tensor, side: int) -> torch.Tensor:
        out = coeff[:, :, side, 0] * y
        for tap in range(1, self.k):
            if tap < y.shape[1]:
                shifted = torch.zeros_like(y)
                shifted[:, tap:] = y[:, :-tap]
                out = out + coeff[:, :, side, tap] * shifted
        return out

    def forward(self, x: torch.Tensor, fn) -> torch.Tensor:  # x [R, Bd, H] normed sub-layer input
        kernels = triton_kernels(x, "dynconv")
        if kernels is None:
            coeff = self.coefficients(x)
            return self.apply(fn(self.apply(x, coeff, 0)), coeff, 1)
        delta = self.delta(x)  # one projection for both sides

        def conv(y, side):
            return kernels.dynamic_conv(y, delta, self.base_kernel, side, self.group_size)
        return conv(fn(conv(x, 0)), 1)


class DraftAttention(nn.Module):
    FUSED = {"kv_proj": ("k_proj", "v_proj")}  # q apart: see the module docstring

    def __init__(self, c, rotary: RotaryEmbedding):
        super().__init__()
        self.num_heads, self.num_kv_heads = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        bias = bool(getattr(c, "attention_bias", False))
        h, d = c.hidden_size, self.head_dim
        self.q_proj = nn.Linear(h, self.num_heads * d, bias=bias)
        self.k_proj = nn.Linear(h, self.num_kv_heads * d, bias=bias)
        self.v_proj = nn.Linear(h, self.num_kv_heads * d, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * d, h, bias=bias)
        self.q_norm = RMSNorm(d, c.rms_norm_eps)
        self.k_norm = RMSNorm(d, c.rms_norm_eps)
        self.rotary = [rotary]
        self.scaling = d ** -0.5

    def context_kv(self, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor):
        """k, v [N, Hkv*D]: projections of the context rows -> k, v [N, Hkv, D] (k normed and
        rotated at `positions`)."""
        n = k.shape[0]
        k = k.view(n, self.num_kv_heads, self.head_dim)
        # no q here: RotaryEmbedding.forward with an empty q (on CUDA one Triton launch with the
        # norm, where rotate() would take about seven torch launches)
        _, k = self.rotary[0](positions, k[:, :0], k, k_norm=self.k_norm)
        return k, v.view(n, self.num_kv_heads, self.head_dim)

    def forward(self, x, positions, backend, layer_id, causal, window):
        t = x.shape[0]
        q = self.q_proj(x).view(t, self.num_heads, self.head_dim)
        k, v = project(self, "kv_proj", x)
        k = k.view(t, self.num_kv_heads, self.head_dim)
        v = v.view(t, self.num_kv_heads, self.head_dim)
        q, k = self.rotary[0](positions, q, k, q_norm=self.q_norm, k_norm=self.k_norm)
        o = backend.attend(q, k, v, layer_id, self.scaling, causal, window)
        return self.o_proj(o.reshape(t, self.num_heads * self.head_dim))


class DraftLayer(nn.Module):
    def __init__(self, dc: DraftConfig, layer_id: int, rotary: RotaryEmbedding):
        super().__init__()
        c = dc.hf
        self.layer_id, self.causal = layer_id, dc.layer_causal[layer_id]
        self.window = dc.layer_window[layer_id]
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = DraftAttention(c, rotary)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = GatedMLP(c.hidden_size, c.intermediate_size, c.hidden_act,
                            bool(getattr(c, "mlp_bias", False)))
        self.has_conv = dc.conv_kernel_size is not None
        if self.has_conv:
            self.attention_conv = DynamicConv(c.hidden_size, dc.conv_kernel_size, dc.conv_group_size)
            self.mlp_conv = DynamicConv(c.hidden_size, dc.conv_kernel_size, dc.conv_group_size)

    def _sub(self, x, fn, conv):  # x [R, Bd, H] normed sub-layer input
        return fn(x) if conv is None else conv(x, fn)

    def forward(self, x, positions, backend, delta=None):
        """x [R, Bd, H], positions [R*Bd]. As the target's DecoderLayer: the layer input is
        x + delta (delta None: x), the output x' + delta' (returned as the pair); each residual
        add is left to the next norm's forward_add, fused into the norm kernel on CUDA."""
        r, b, h = x.shape

        def attn(y):
            out = self.self_attn(y.reshape(r * b, h), positions, backend, self.layer_id,
                                 self.causal, self.window)
            return out.view(r, b, h)

        y, x = self.input_layernorm.forward_add(x, delta)
        y, x = self.post_attention_layernorm.forward_add(
            x, self._sub(y, attn, self.attention_conv if self.has_conv else None))
        return x, self._sub(y, self.mlp, self.mlp_conv if self.has_conv else None)


class BlockDrafter(nn.Module):
    def __init__(self, dc: DraftConfig, target_hidden: int, max_positions: int):
        super().__init__()
        c = dc.hf
        if c.hidden_size != target_hidden:
            raise ValueError(f"drafter hidden_size {c.hidden_size} differs from the target's "
                             f"{target_hidden}; it must share the target's embedding and head")
        self.dc = dc
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        self.rotary_emb = RotaryEmbedding(c, head_dim, max_positions, partial=False)
        n_feat = len(dc.target_layer_ids)
        self.fc = nn.Linear(n_feat * target_hidden, c.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.layers = nn.ModuleList(DraftLayer(dc, i, self.rotary_emb)
                                    for i in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        if dc.selector_rank is not None:
            self.candidate_selector = CandidateSelector(c.hidden_size, c.vocab_size,
                                                        dc.selector_rank)
        if dc.algorithm == "DSPARK":
            self.markov_head = MarkovHead(c.vocab_size, dc.markov_rank)
            if dc.enable_confidence_head:
                extra = dc.markov_rank if dc.confidence_head_with_markov else 0
                self.confidence_head = ConfidenceHead(c.hidden_size + extra)
        self._target = []  # [embed_tokens, lm_head], shared by reference, not our parameters

    def bind_target(self, embed_tokens: nn.Embedding, lm_head: nn.Linear) -> None:
        if embed_tokens.num_embeddings <= self.dc.mask_token_id:
            raise ValueError(f"mask_token_id {self.dc.mask_token_id} is outside the target "
                             f"embedding ({embed_tokens.num_embeddings} rows)")
        self._target = [embed_tokens, lm_head]

    def fuse(self, context_kv: bool = True) -> None:
        """The inference layout of the module docstring, in place (after loading; idempotent).
        context_kv False: no all-layer context GEMM (W12 weights)."""
        fuse_projections(self)  # per layer: [k; v], and [gate; up] (GatedMLP.FUSED)
        if context_kv and "context_kv_proj" not in self._modules:
            fuse_rows(self, "context_kv_proj", [(layer.self_attn, "kv_proj")
                                                for layer in self.layers])

    def store_context(self, feats: torch.Tensor, positions: torch.Tensor, backend) -> None:
        ctx = self.hidden_norm(self.fc(feats))  # [N, H]
        if "context_kv_proj" in self._modules:  # every layer's k and v in one GEMM
            attn = self.layers[0].self_attn
            kv = self.context_kv_proj(ctx).split(attn.num_kv_heads * attn.head_dim, dim=-1)
            pairs = list(zip(kv[0::2], kv[1::2]))
        else:
            pairs = [project(layer.self_attn, "kv_proj", ctx) for layer in self.layers]
        for i, (layer, (k, v)) in enumerate(zip(self.layers, pairs)):
            backend.store(i, *layer.self_attn.context_kv(k, v, positions))

    def forward(self, block_ids: torch.Tensor, positions: torch.Tensor, backend) -> torch.Tensor:
        x = self._target[0](block_ids)  # raw target embedding: no target embed-norm
        if self.dc.input_embedding_scale != 1.0:
            x = x * self.dc.input_embedding_scale
        flat_pos, delta = positions.reshape(-1), None
        for layer in self.layers:
            x, delta = layer(x, flat_pos, backend, delta)
        return self.norm.forward_add(x, delta)[0]

    def head_topk(self, hidden: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The k largest of logits(hidden) and their token ids, [..., k] each (fp32, int64),
        sorted. On the Triton path (CUDA inference) the head's output goes straight to
        kernels/topk.py (two launches; ties by smaller id), without the fp32 logits; else
        torch's topk of logits()."""
        z = self._target[1](hidden)
        kernels = triton_kernels(z, "topk")
        if kernels is None:
            return self._scaled(z).topk(k, dim=-1)
        vals, ids = kernels.topk_rows(z.reshape(-1, z.shape[-1]), k, self.dc.output_multiplier,
                                      self.dc.final_logit_softcapping)
        return vals.view(*z.shape[:-1], k), ids.view(*z.shape[:-1], k)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [..., H] -> target-head logits [..., V] fp32, multiplier and softcap applied."""
        return self._scaled(self._target[1](hidden))

    def _scaled(self, z: torch.Tensor) -> torch.Tensor:
        """The head's raw output -> fp32 logits, multiplier and softcap applied."""
        z = z.float() * self.dc.output_multiplier
        cap = self.dc.final_logit_softcapping
        return z if cap is None else cap * torch.tanh(z / cap)
