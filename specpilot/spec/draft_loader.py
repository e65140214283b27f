"""Load a drafter checkpoint folder into a BlockDrafter bound to the target.

Tensor names: as the checkpoint, after these aliases: an optional `model.` prefix is stripped;
`encoder.fc.` -> `fc.` and `encoder.output_norm_enc.` -> `hidden_norm.` (Muse-Glimmer
assistant); `embed_tokens`, `lm_head` and rotary caches are skipped (the target's are shared).
The tensors load into the checkpoint's separate linears; then BlockDrafter.fuse() builds the
inference layout (fused GEMMs, drafter.py's docstring), as build_model fuses the target.
"""

from __future__ import annotations

import torch

from specpilot.models.loader import (WeightLoadError, checkpoint_files, instantiate,
                                     open_tensors, randomize)
from specpilot.spec.draft_config import DraftConfig
from specpilot.spec.drafter import BlockDrafter

FUSE = True  # the inference layout after loading (False: the checkpoint's linears; benchmarks)
_ALIASES = (("encoder.fc.", "fc."), ("encoder.output_norm_enc.", "hidden_norm."))
_SKIP = ("embed_tokens.", "lm_head.", "rotary_emb.")


def canonical_name(name: str) -> str | None:
    if name.startswith("model."):
        name = name[len("model."):]
    for old, new in _ALIASES:
        if name.startswith(old):
            name = new + name[len(old):]
    return None if name.startswith(_SKIP) else name


def load_drafter(path: str, target_model, dtype: torch.dtype, device: torch.device,
                 max_positions: int, load_format: str = "auto",
                 fuse_context_kv: bool = True) -> BlockDrafter:
    """fuse_context_kv False: keep one context K/V GEMM per layer (for W12 conversion, which
    cannot slice the all-layer one); q|kv and gate_up are fused either way."""
    tc = target_model.config
    dc = DraftConfig.from_path(path, tc.num_hidden_layers, tc.vocab_size)
    drafter = instantiate(lambda: BlockDrafter(dc, tc.hidden_size, max_positions), dtype, device)
    if load_format == "dummy":
        randomize(drafter, seed=1)
    else:
        _load_tensors(drafter, dc, path, tc)
    if FUSE:
        drafter.fuse(context_kv=fuse_context_kv)
    drafter.bind_target(target_model.get_input_embeddings(), target_model.lm_head)
    return drafter.eval()


def _load_tensors(drafter: BlockDrafter, dc: DraftConfig, path: str, tc) -> None:
    params = dict(drafter.named_parameters())
    files = {}
    for raw, fn in checkpoint_files(path).items():
        name = canonical_name(raw)
        if name is not None:
            files[name] = (raw, fn)
    missing = sorted(set(params) - set(files))
    if missing:
        raise WeightLoadError(f"drafter {path!r} lacks tensor(s): {', '.join(missing[:8])}")
    unexpected = sorted(n for n in set(files) - set(params) if "rotary" not in n)
    if unexpected:
        raise WeightLoadError(f"drafter {path!r} has tensor(s) the {dc.architecture} layout does "
                              f"not use: {', '.join(unexpected[:8])}")
    with torch.no_grad():
        for name, p in params.items():
            raw, fn = files[name]
            with open_tensors(fn) as get:
                t = get(raw, p.device)
            if tuple(t.shape) != tuple(p.shape):
                if name == "fc.weight":
                    raise WeightLoadError(
                        f"fc.weight has shape {tuple(t.shape)}: its input width {t.shape[-1]} "
                        f"does not match {len(dc.target_layer_ids)} target layers x hidden "
                        f"{tc.hidden_size} = {p.shape[1]}")
                raise WeightLoadError(f"drafter tensor {raw!r} has shape {tuple(t.shape)}, "
                                      f"expected {tuple(p.shape)}")
            p.copy_(t.to(p.dtype))
