"""The drafter's training forward: BlockDrafter's own parameters, a dense explicit mask.

Per sequence n (length L) with K anchor blocks of B rows (T = K*B query rows):
  ctx   = hidden_norm(fc(feats))                  [N, L, H]   feats: target hidden_states[id+1]
  keys  = [ctx rows 0..L-1 | block rows]          per layer: k_norm(k_proj(.)) + RoPE, v_proj(.)
  mask  [N, 1, T, L+T]: block row (k, i) sees context p iff p < anchor_k (strictly before the
        anchor: the anchor's own feature is not available at inference) and every row of its own
        block (bidirectional, the non-causal DFlash layout); never another block.
Positions: context row p at p, block row (k, j) at anchor_k + j. This is exactly what
BlockDrafter.store_context + BlockDrafter.forward compute at inference for one block, batched
(tested in tests/unit/test_train_drafter.py), so the trained weights are the loader's weights.

Loss, for rows j >= 1, weighted exp(-(j-1)/gamma), on target-head logits (the target's frozen
lm_head on the drafter's final-normed hidden); what row j learns (`distill`):
  none    cross-entropy against the data token ids[anchor + j] (the released DFlash recipe);
  argmax  cross-entropy against the target's own greedy choice at that position, argmax of its
          logits after ids[.. anchor + j - 1] (from the same frozen forward that gives the
          features). At temperature 0 a draft row is accepted iff it equals exactly that token;
          on sampled continuations the data token differs from it wherever the draw did;
  kl      KL(target || drafter) over the whole vocabulary (soft labels from the same logits).
The metrics (acc, acc1, tau_est) compare the drafter's argmax with the labels learnt (for kl:
the target's argmax).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from specpilot.spec.draft_config import DraftConfig, default_target_layer_ids
from specpilot.spec.drafter import BlockDrafter
from specpilot.train_drafter.batching import IGNORE, Batch


def drafter_config(tc, num_layers: int, block_size: int, mask_token_id: int,
                   target_layer_ids=None, intermediate_size=None) -> dict:
    """config.json of a DFlashDraftModel for target config `tc` (public DFlash layout)."""
    ids = list(target_layer_ids or default_target_layer_ids(tc.num_hidden_layers, num_layers))
    head_dim = getattr(tc, "head_dim", None) or tc.hidden_size // tc.num_attention_heads
    rope = dict(getattr(tc, "rope_parameters", None) or {})
    theta = float(rope.get("rope_theta", getattr(tc, "rope_theta", None) or 10000.0))
    return {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
        "hidden_size": tc.hidden_size,
        "intermediate_size": int(intermediate_size or tc.intermediate_size),
        "num_hidden_layers": num_layers, "num_attention_heads": tc.num_attention_heads,
        "num_key_value_heads": tc.num_key_value_heads, "head_dim": head_dim,
        "hidden_act": "silu", "attention_bias": False, "rms_norm_eps": float(tc.rms_norm_eps),
        "rope_theta": theta, "rope_parameters": {"rope_type": "default", "rope_theta": theta},
        "max_position_embeddings": tc.max_position_embeddings, "vocab_size": tc.vocab_size,
        "tie_word_embeddings": False, "dtype": "bfloat16",
        "block_size": block_size, "num_target_layers": tc.num_hidden_layers,
        "dflash_config": {"mask_token_id": int(mask_token_id), "target_layer_ids": ids,
                          "block_size": block_size},
    }


def new_drafter(cfg: dict, target, max_positions: int, seed: int) -> BlockDrafter:
    """A freshly initialised fp32 BlockDrafter bound to the target's frozen embedding and head.

    PyTorch default init, except the final `norm` gain, copied from the target's final norm (so
    the shared head sees hidden states at the target's scale from step 0)."""
    tc = target.config
    dc = DraftConfig.from_dict(cfg, tc.num_hidden_layers, tc.vocab_size)
    if any(dc.layer_causal) or any(w is not None for w in dc.layer_window) or dc.conv_kernel_size:
        raise ValueError("training supports the non-causal DFlash layout only")
    torch.manual_seed(seed)
    drafter = BlockDrafter(dc, tc.hidden_size, max_positions)
    drafter.bind_target(target.get_input_embeddings(), target.get_output_embeddings())
    final_norm = getattr(getattr(target, target.base_model_prefix), "norm", None)
    w = getattr(final_norm, "weight", None)
    if w is not None and w.shape == drafter.norm.weight.shape:
        with torch.no_grad():
            drafter.norm.weight.copy_(w.float())
    return drafter.to(next(target.parameters()).device)


DISTILL = ("none", "argmax", "kl")


@torch.no_grad()
def target_features(target, input_ids, attention_mask, layer_ids, final: bool = False):
    """[N, L] ids -> [N, L, len(layer_ids) * H]: HF hidden_states[id + 1] (the output of decoder
    layer id) concatenated, from the frozen target's base model (no LM head computed). With
    `final`, also the base model's last (final-normed) hidden state [N, L, H]: the target's
    logits at row p (its prediction of token p + 1) are its head applied to row p."""
    base = getattr(target, target.base_model_prefix)
    out = base(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    feats = torch.cat([out.hidden_states[i + 1] for i in layer_ids], dim=-1)
    return (feats, out.last_hidden_state) if final else feats


@torch.no_grad()
def target_logits(drafter: BlockDrafter, final: torch.Tensor, anchors: torch.Tensor,
                  labels: torch.Tensor) -> torch.Tensor:
    """The target's logits [M, V] for the labelled block rows (labels != IGNORE, in that order):
    row (n, k, j) is token anchor + j, predicted from the target's final hidden at
    anchor + j - 1."""
    n, _, b = labels.shape
    pos = anchors[:, :, None] + torch.arange(b, device=anchors.device) - 1  # [N, K, B]
    seq = torch.arange(n, device=final.device)[:, None, None].expand_as(pos)
    sel = labels != IGNORE
    return drafter.logits(final[seq[sel], pos[sel]])


def block_mask(anchors: torch.Tensor, ctx_len: int, block_size: int) -> torch.Tensor:
    """anchors [N, K] -> bool [N, 1, K*B, ctx_len + K*B] (True = may attend); see module doc."""
    n, k = anchors.shape
    dev = anchors.device
    row_anchor = anchors.repeat_interleave(block_size, dim=1)  # [N, T]
    ctx_ok = torch.arange(ctx_len, device=dev)[None, None, :] < row_anchor[:, :, None]
    blk = torch.arange(k * block_size, device=dev) // block_size
    blk_ok = (blk[:, None] == blk[None, :]).expand(n, -1, -1)
    return torch.cat([ctx_ok, blk_ok], dim=2)[:, None]


def _rot(attn, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """positions [N, S]; x [N, S, heads, D] -> RoPE-rotated x."""
    n, s, h, d = x.shape
    return attn.rotary[0].rotate(positions.reshape(-1), x.reshape(n * s, h, d)).view(n, s, h, d)


def _attention(attn, x, ctx, blk_pos, ctx_pos, mask):
    """x [N, T, H] normed block rows, ctx [N, L, H] -> attention output [N, T, H]."""
    n, t, _ = x.shape
    hq, hkv, d = attn.num_heads, attn.num_kv_heads, attn.head_dim
    q = _rot(attn, blk_pos, attn.q_norm(attn.q_proj(x).view(n, t, hq, d)))
    k = _rot(attn, blk_pos, attn.k_norm(attn.k_proj(x).view(n, t, hkv, d)))
    v = attn.v_proj(x).view(n, t, hkv, d)
    lc = ctx.shape[1]
    kc = _rot(attn, ctx_pos, attn.k_norm(attn.k_proj(ctx).view(n, lc, hkv, d)))
    vc = attn.v_proj(ctx).view(n, lc, hkv, d)
    kk = torch.cat([kc, k], dim=1).transpose(1, 2)  # [N, Hkv, L+T, D]
    vv = torch.cat([vc, v], dim=1).transpose(1, 2)
    qq = q.transpose(1, 2)
    dtype = vv.dtype
    o = F.scaled_dot_product_attention(qq.to(dtype), kk.to(dtype), vv, attn_mask=mask,
                                       scale=attn.scaling, enable_gqa=hq != hkv)
    return attn.o_proj(o.transpose(1, 2).reshape(n, t, hq * d))


def block_hidden(drafter: BlockDrafter, feats: torch.Tensor, block_ids: torch.Tensor,
                 anchors: torch.Tensor) -> torch.Tensor:
    """feats [N, L, n*H], block_ids [N, K, B], anchors [N, K] -> hidden [N, K, B, H] after norm."""
    n, k, b = block_ids.shape
    lc = feats.shape[1]
    master = drafter.fc.weight.dtype  # fp32 residual stream; autocast (if on) runs the matmuls
    ctx = drafter.hidden_norm(drafter.fc(feats.to(master)))
    x = drafter._target[0](block_ids.reshape(n, k * b)).to(master)  # raw target embedding rows
    if drafter.dc.input_embedding_scale != 1.0:
        x = x * drafter.dc.input_embedding_scale
    blk_pos = (anchors[:, :, None] + torch.arange(b, device=anchors.device)).reshape(n, k * b)
    ctx_pos = torch.arange(lc, device=feats.device).expand(n, lc)
    mask = block_mask(anchors, lc, b)
    for layer in drafter.layers:
        x = x + _attention(layer.self_attn, layer.input_layernorm(x), ctx, blk_pos, ctx_pos, mask)
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    return drafter.norm(x).view(n, k, b, -1)


def position_weights(block_size: int, gamma: float, device=None) -> torch.Tensor:
    """[B]: 0 for row 0, exp(-(j-1)/gamma) for rows j >= 1."""
    j = torch.arange(block_size, device=device, dtype=torch.float32)
    return torch.where(j >= 1, torch.exp(-(j - 1) / gamma), torch.zeros_like(j))


def block_loss(drafter: BlockDrafter, hidden: torch.Tensor, labels: torch.Tensor, gamma: float,
               teacher: torch.Tensor | None = None, distill: str = "none"):
    """hidden [N, K, B, H], labels [N, K, B] -> (weighted loss, metrics dict of floats).
    `teacher`: the target's logits [M, V] of the labelled rows (target_logits), needed by
    distill argmax / kl (module doc); with argmax the labels become their argmax.

    Metrics: acc1 (row 1 top-1), acc (all labelled rows) and tau_est = 1 + mean over blocks of
    the run of leading correct rows (greedy acceptance length within the batch's blocks)."""
    if distill not in DISTILL:
        raise ValueError(f"distill must be one of {DISTILL}, got {distill!r}")
    if distill != "none" and teacher is None:
        raise ValueError(f"distill {distill!r} needs the target's logits (teacher)")
    b = labels.shape[-1]
    if distill != "none":
        labels = labels.clone()
        labels[labels != IGNORE] = teacher.argmax(-1)
    w = position_weights(b, gamma, labels.device).expand_as(labels) * (labels != IGNORE)
    sel = w > 0
    logits = drafter.logits(hidden[sel])  # [M, V] fp32
    if distill == "kl":
        keep = w[labels != IGNORE] > 0  # rows of `teacher` that `sel` keeps (row 0 weighs 0)
        logp_t = F.log_softmax(teacher[keep].float(), dim=-1)
        per_row = (logp_t.exp() * (logp_t - F.log_softmax(logits, dim=-1))).sum(-1)
    else:
        per_row = F.cross_entropy(logits, labels[sel], reduction="none")
    loss = (per_row * w[sel]).sum() / w[sel].sum().clamp_min(1e-9)
    with torch.no_grad():
        correct = torch.zeros_like(labels, dtype=torch.bool)
        correct[sel] = logits.argmax(-1) == labels[sel]
        blocks = labels[:, :, 1] != IGNORE  # [N, K]
        run = correct[:, :, 1:].long().cumprod(-1).sum(-1)  # [N, K]
        metrics = {"loss": float(loss), "acc": float(correct[sel].float().mean()),
                   "acc1": float(correct[:, :, 1][blocks].float().mean()),
                   "tau_est": 1.0 + float(run[blocks].float().mean())}
    return loss, metrics


def forward_loss(drafter, target, batch: Batch, gamma: float, autocast: bool,
                 distill: str = "none"):
    """The whole training forward for one batch: frozen target features (and, to distill, the
    target's logits of the labelled rows), drafter, loss."""
    dev_type = batch.input_ids.device.type
    ids = drafter.dc.target_layer_ids
    with torch.autocast(dev_type, dtype=torch.bfloat16, enabled=autocast):
        out = target_features(target, batch.input_ids, batch.attention_mask, ids,
                              final=distill != "none")
        feats, teacher = out, None
        if distill != "none":
            feats, final = out
            teacher = target_logits(drafter, final, batch.anchors, batch.labels)
        hidden = block_hidden(drafter, feats, batch.block_ids, batch.anchors)
        return block_loss(drafter, hidden, batch.labels, gamma, teacher, distill)


def count_parameters(module) -> int:
    return sum(p.numel() for p in module.parameters())


def lr_at(step: int, total: int, base: float, warmup: int, kind: str = "cosine",
          min_ratio: float = 0.1, progress: float | None = None) -> float:
    """Learning rate for optimizer step `step` (0-based): linear warmup over `warmup` steps, then
    cosine or linear decay to base * min_ratio at `total` (constant when total is unknown: 0).
    `progress` in [0, 1], when given, replaces the step-based position in the decay (a run bounded
    by time rather than by a step count decays over its time budget)."""
    if step < warmup:
        return base * (step + 1) / warmup
    if progress is not None:
        t = min(1.0, max(0.0, progress))
    elif total <= warmup:
        return base
    else:
        t = min(1.0, (step - warmup) / max(1, total - warmup))
    f = 0.5 * (1 + math.cos(math.pi * t)) if kind == "cosine" else 1 - t
    return base * (min_ratio + (1 - min_ratio) * f)
