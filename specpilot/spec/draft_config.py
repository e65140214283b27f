"""DraftConfig: the drafter's config.json, resolved and checked against the target.

Lookup order for every drafter key: `dflash_config[key]`, then the top level, then the default.
Formats, dispatched on `architectures`:
  DFlashDraftModel            DFlash: rows 1..B-1 of the block propose (row 0 is the anchor)
  MuseGlimmerAssistantModel   DFlash layout, flat keys, tensors under `encoder.`
  DFlash2DraftModel           DFlash + grouped dynamic causal conv + candidate selector
  Qwen3DSparkModel            DSpark: shifted labels (all block rows propose), Markov head,
                              confidence head
`num_draft_tokens` counts the verify rows (anchor + proposals), as SGLang's
--speculative-num-draft-tokens does: DFlash block B -> B rows; DSpark gamma -> gamma + 1 rows.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Optional

ALGORITHMS = {
    "DFlashDraftModel": "DFLASH",
    "MuseGlimmerAssistantModel": "DFLASH",
    "DFlash2DraftModel": "DFLASH2",
    "Qwen3DSparkModel": "DSPARK",
    "DSparkDraftModel": "DSPARK",  # the same layout under the name some DSpark exports carry
}
_MISSING = object()


class DraftConfigError(ValueError):
    pass


def default_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """The DFlash rule: one draft layer -> [L // 2]; else n ids evenly spaced over 1 .. L-3."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    lo, hi = 1, num_target_layers - 3
    return [round(lo + i * (hi - lo) / (num_draft_layers - 1)) for i in range(num_draft_layers)]


@dataclass(frozen=True)
class DraftConfig:
    architecture: str
    algorithm: str
    hf: object  # transformers Qwen3Config holding the backbone fields (and RoPE parameters)
    block_size: int  # drafter block rows, anchor included
    mask_token_id: int
    target_layer_ids: tuple[int, ...]
    layer_causal: tuple[bool, ...]
    layer_window: tuple[Optional[int], ...]
    output_multiplier: float = 1.0
    final_logit_softcapping: Optional[float] = None
    input_embedding_scale: float = 1.0
    conv_kernel_size: Optional[int] = None
    conv_group_size: Optional[int] = None
    selector_rank: Optional[int] = None
    selector_top_k: Optional[int] = None
    markov_rank: Optional[int] = None
    markov_head_type: str = "vanilla"
    enable_confidence_head: bool = False
    confidence_head_with_markov: bool = False

    @property
    def shifted_labels(self) -> bool:
        return self.algorithm == "DSPARK"

    @property
    def num_draft_tokens(self) -> int:
        """Verify rows per step: anchor + proposals."""
        return self.block_size + 1 if self.shifted_labels else self.block_size

    @property
    def num_layers(self) -> int:
        return self.hf.num_hidden_layers

    @classmethod
    def from_dict(cls, raw: dict, num_target_layers: int, target_vocab: int) -> "DraftConfig":
        from transformers import Qwen3Config

        dcfg = raw.get("dflash_config") or {}

        def get(key, default=_MISSING):
            if key in dcfg:
                return dcfg[key]
            if key in raw:
                return raw[key]
            if default is _MISSING:
                raise DraftConfigError(f"drafter config lacks {key!r}")
            return default

        archs = raw.get("architectures") or []
        arch = next((a for a in archs if a in ALGORITHMS), None)
        if arch is None:
            raise DraftConfigError(f"unsupported drafter architecture(s) {archs}; "
                                   f"supported: {sorted(ALGORITHMS)}")
        backbone = {k: v for k, v in raw.items() if k not in ("dflash_config", "model_type",
                                                              "architectures", "auto_map")}
        hf = Qwen3Config(**backbone)
        n_layers = hf.num_hidden_layers
        ids = get("target_layer_ids", None)
        if ids is None:
            n_tgt = get("num_target_layers", num_target_layers)
            ids = default_target_layer_ids(n_tgt, n_layers)
        ids = tuple(int(i) for i in ids)
        bad = [i for i in ids if not 0 <= i < num_target_layers]
        if bad or not ids:
            raise DraftConfigError(f"target_layer_ids {list(ids)} out of range for a target with "
                                   f"{num_target_layers} layers")
        declared = get("num_target_layers", None)
        if declared is not None and int(declared) != num_target_layers:
            raise DraftConfigError(f"drafter was trained on a {declared}-layer target; this "
                                   f"target has {num_target_layers} layers")
        mask = get("mask_token_id", None)
        if mask is None:
            raise DraftConfigError("drafter config lacks mask_token_id")
        if not 0 <= int(mask) < target_vocab:
            raise DraftConfigError(f"mask_token_id {mask} is outside the target vocabulary "
                                   f"(size {target_vocab})")
        pairs = [("conv_kernel_size", "conv_group_size"), ("selector_rank", "selector_top_k")]
        for a, b in pairs:
            if (get(a, None) is None) != (get(b, None) is None):
                raise DraftConfigError(f"{a!r} and {b!r} must be given together")
        if arch == "DFlash2DraftModel" and get("selector_rank", None) is None:
            raise DraftConfigError("DFlash2DraftModel needs selector_rank and selector_top_k")
        causal, window = cls._layer_masks(raw, dcfg, hf, n_layers, arch)
        markov_type = get("markov_head_type", "vanilla")
        if ALGORITHMS[arch] == "DSPARK" and markov_type != "vanilla":
            raise DraftConfigError(f"DSpark markov_head_type {markov_type!r} is not supported "
                                   "(only 'vanilla')")
        cap = get("final_logit_softcapping", None)
        block = int(get("block_size", 16))
        if block < (1 if ALGORITHMS[arch] == "DSPARK" else 2):
            raise DraftConfigError(f"block_size {block} is too small: a block must propose at "
                                   "least one token")
        # tensors sized by the drafter's vocab are indexed by / added to the target's token ids
        if (get("selector_rank", None) is not None and hf.vocab_size < target_vocab) or (
                ALGORITHMS[arch] == "DSPARK" and hf.vocab_size != target_vocab):
            raise DraftConfigError(f"drafter vocab_size {hf.vocab_size} does not match the "
                                   f"target vocabulary (size {target_vocab})")
        k, g = get("selector_top_k", None), get("conv_group_size", None)
        if k is not None and not 1 <= int(k) <= target_vocab:
            raise DraftConfigError(f"selector_top_k {k} must be in [1, {target_vocab}]")
        if g is not None and (int(g) < 1 or hf.hidden_size % int(g)):
            raise DraftConfigError(f"conv_group_size {g} must divide hidden_size "
                                   f"{hf.hidden_size}")
        return cls(
            architecture=arch, algorithm=ALGORITHMS[arch], hf=hf,
            block_size=block, mask_token_id=int(mask),
            target_layer_ids=ids, layer_causal=causal, layer_window=window,
            output_multiplier=float(get("output_multiplier", 1.0)),
            final_logit_softcapping=None if cap is None else float(cap),
            input_embedding_scale=float(get("input_embedding_scale", 1.0)),
            conv_kernel_size=get("conv_kernel_size", None),
            conv_group_size=get("conv_group_size", None),
            selector_rank=get("selector_rank", None), selector_top_k=get("selector_top_k", None),
            markov_rank=get("markov_rank", 256 if ALGORITHMS[arch] == "DSPARK" else None),
            markov_head_type=markov_type,
            enable_confidence_head=bool(get("enable_confidence_head", False)),
            confidence_head_with_markov=bool(get("confidence_head_with_markov", False)))

    @staticmethod
    def _layer_masks(raw, dcfg, hf, n_layers, arch):
        """Per layer (causal, window). `is_causal`, then dflash_config.causal, then sliding=causal.

        MuseGlimmerAssistantModel follows transformers' muse_glimmer_assistant instead: every layer
        bidirectional, and its sliding window inclusive (|q - k| <= W), stored here as W + 1 for
        our strict `distance < window` masks."""
        types = raw.get("layer_types") or dcfg.get("layer_types")
        if types is None:
            sliding = bool(raw.get("use_sliding_window", False) or dcfg.get("use_swa", False))
            types = ["sliding_attention" if sliding else "full_attention"] * n_layers
        if len(types) != n_layers:
            raise DraftConfigError(f"layer_types has {len(types)} entries for {n_layers} layers")
        window = raw.get("sliding_window", dcfg.get("swa_window_size"))
        forced = raw.get("is_causal", dcfg.get("causal"))
        muse = arch == "MuseGlimmerAssistantModel"
        if muse and forced is None:
            forced = False
        causal, windows = [], []
        for t in types:
            is_sliding = t == "sliding_attention"
            if is_sliding and not window:
                raise DraftConfigError("a sliding_attention layer needs sliding_window")
            causal.append(bool(forced) if forced is not None else is_sliding)
            windows.append((int(window) + (1 if muse else 0)) if is_sliding else None)
        return tuple(causal), tuple(windows)

    @classmethod
    def from_path(cls, path: str, num_target_layers: int, target_vocab: int) -> "DraftConfig":
        fn = os.path.join(path, "config.json")
        if not os.path.isfile(fn):
            raise FileNotFoundError(f"drafter folder {path!r} has no config.json")
        with open(fn) as f:
            return cls.from_dict(json.load(f), num_target_layers, target_vocab)
