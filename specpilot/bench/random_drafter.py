"""Random (untrained) DFlash drafter checkpoints of a target's shapes, for the demo setting.

Until a trained drafter ships for the embedded demo model, the demo setting's `stock` engine
runs with a drafter of the right shapes and random weights: it exercises the whole speculative
path (draft, verify, accept, commit) and is lossless like any drafter, but accepts almost
nothing, so the demo shows no speedup.

Contract of `make_random_drafter(folder, **shape)`:
  * writes `config.json` (architectures ["DFlashDraftModel"], `dflash_config` with
    mask_token_id / target_layer_ids / block_size, Qwen3 backbone keys) and `model.safetensors`
    with the DFlash tensor names (fc, hidden_norm, norm, layers.{i}.*; no embedding, no head);
  * deterministic: the same shape and seed give the same bytes;
  * `ensure_random_drafter(folder, shape)` builds into a temp folder beside `folder`, then
    renames it into place, and rebuilds when the recorded shape differs (MARKER file).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

MARKER = ".specpilot-random-drafter.json"
FORMAT_VERSION = 1
DEFAULTS = dict(kind="dflash", target_layers=(1, 15, 27), layers=2, block_size=16, hidden=576,
                vocab=49152, mask=49151, num_target_layers=30, num_attention_heads=9,
                num_key_value_heads=3, head_dim=64, intermediate_size=1536, seed=99)


def _shapes(p: dict) -> dict[str, list[int]]:
    h, q, kv = p["hidden"], p["num_attention_heads"] * p["head_dim"], p["num_key_value_heads"] * p["head_dim"]
    ff = p["intermediate_size"]
    shapes = {"fc.weight": [h, len(p["target_layers"]) * h], "hidden_norm.weight": [h],
              "norm.weight": [h]}
    for i in range(p["layers"]):
        pre = f"layers.{i}."
        shapes.update({
            pre + "input_layernorm.weight": [h], pre + "post_attention_layernorm.weight": [h],
            pre + "self_attn.q_proj.weight": [q, h], pre + "self_attn.k_proj.weight": [kv, h],
            pre + "self_attn.v_proj.weight": [kv, h], pre + "self_attn.o_proj.weight": [h, q],
            pre + "self_attn.q_norm.weight": [p["head_dim"]],
            pre + "self_attn.k_norm.weight": [p["head_dim"]],
            pre + "mlp.gate_proj.weight": [ff, h], pre + "mlp.up_proj.weight": [ff, h],
            pre + "mlp.down_proj.weight": [h, ff]})
    return shapes


def _params(shape: dict) -> dict:
    unknown = sorted(set(shape) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"random drafter: unknown parameter(s) {unknown}; known: {sorted(DEFAULTS)}")
    p = {**DEFAULTS, **shape}
    p["target_layers"] = [int(x) for x in p["target_layers"]]
    if p["kind"] != "dflash":
        raise ValueError(f"random drafter: only kind dflash is supported, got {p['kind']!r}")
    if not 0 <= p["mask"] < p["vocab"]:
        raise ValueError("random drafter: mask must be a token id below vocab")
    if not all(0 <= t < p["num_target_layers"] for t in p["target_layers"]):
        raise ValueError("random drafter: target_layers must lie in [0, num_target_layers)")
    return p


def make_random_drafter(folder, **shape) -> str:
    """Write a random DFlash drafter checkpoint into `folder` (created); returns the folder."""
    import torch
    from safetensors.torch import save_file

    p = _params(shape)
    gen = torch.Generator().manual_seed(int(p["seed"]))
    tensors = {}
    for name, dims in _shapes(p).items():
        if name.endswith("norm.weight") or "layernorm" in name:
            tensors[name] = 1.0 + 0.1 * torch.randn(dims, generator=gen)
        else:
            tensors[name] = torch.randn(dims, generator=gen) / max(dims[-1], 1) ** 0.5
    config = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
        "hidden_size": p["hidden"], "intermediate_size": p["intermediate_size"],
        "num_hidden_layers": p["layers"], "num_attention_heads": p["num_attention_heads"],
        "num_key_value_heads": p["num_key_value_heads"], "head_dim": p["head_dim"],
        "rms_norm_eps": 1e-5, "rope_theta": 100000.0, "max_position_embeddings": 8192,
        "vocab_size": p["vocab"], "hidden_act": "silu", "attention_bias": False,
        "block_size": p["block_size"], "num_target_layers": p["num_target_layers"],
        "dflash_config": {"mask_token_id": p["mask"], "target_layer_ids": p["target_layers"],
                          "block_size": p["block_size"]},
        "specpilot_note": "random weights (specpilot.bench.random_drafter): not a trained drafter",
    }
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return str(folder)


def _marker(p: dict) -> dict:
    return {"format_version": FORMAT_VERSION, "params": p}


def ensure_random_drafter(folder, shape: dict) -> str:
    """The folder, built (atomically) if missing or made with other parameters."""
    from filelock import FileLock

    folder = Path(folder)
    want = _marker(_params(shape))
    marker = folder / MARKER

    def ready() -> bool:
        try:
            return json.loads(marker.read_text()) == want and (folder / "model.safetensors").is_file()
        except (OSError, ValueError):
            return False

    if ready():
        return str(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.parent / f".{folder.name}.lock")):
        if ready():
            return str(folder)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
        try:
            make_random_drafter(tmp, **shape)
            (tmp / MARKER).write_text(json.dumps(want, indent=2) + "\n")
            tmp.chmod(0o755)
            for f in tmp.iterdir():
                f.chmod(0o644)
            if folder.exists():
                old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
                os.replace(folder, old)
                shutil.rmtree(old, ignore_errors=True)
            os.replace(tmp, folder)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return str(folder)
