"""Checkpoints: the public DFlash export and the trainer state.

Export folder (what specpilot.spec.draft_loader.load_drafter and other DFlash runtimes read):
  config.json        DFlashDraftModel, model_type qwen3, backbone fields, block_size,
                     num_target_layers, dflash_config {mask_token_id, target_layer_ids, block_size}
  model.safetensors  fc.weight, hidden_norm.weight, layers.*, norm.weight (no embed / lm_head),
                     in the export dtype (bf16 by default)
  train_meta.json    how it was made: target, data split and counts, mask-token choice, run
Trainer state (`trainer_state.pt`, in --state-dir, default the export folder): fp32 drafter
weights, AdamW state, step, total steps, sampler state (data order + anchor RNG), config, meta.

Every file is written to a temporary name and renamed into place, so an interrupted save leaves
the previous complete file.

Resume (`load_resume`): a folder with trainer_state.pt continues exactly; a folder with only an
export (config.json + model.safetensors, e.g. a drafter fetched back from a GPU run) is a warm
start: its weights and config, a fresh optimizer and schedule.
"""

from __future__ import annotations

import json
import os

import torch
from safetensors.torch import load_file, save_file

STATE_FILE = "trainer_state.pt"
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}


def _replace(tmp: str, final: str) -> None:
    os.replace(tmp, final)


def write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")
    _replace(tmp, path)


def drafter_tensors(drafter) -> dict[str, torch.Tensor]:
    """The checkpoint tensors (persistent state: no RoPE tables, no shared target modules)."""
    return {k: v for k, v in drafter.state_dict().items()}


def save_export(out_dir: str, drafter, cfg: dict, meta: dict, dtype: str = "bfloat16") -> None:
    if dtype not in DTYPES:
        raise ValueError(f"export dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    os.makedirs(out_dir, exist_ok=True)
    tensors = {k: v.detach().to("cpu", DTYPES[dtype]).contiguous()
               for k, v in drafter_tensors(drafter).items()}
    tmp = os.path.join(out_dir, "model.safetensors.tmp")
    save_file(tensors, tmp, metadata={"format": "pt"})
    os.chmod(tmp, 0o644)
    _replace(tmp, os.path.join(out_dir, "model.safetensors"))
    write_json(os.path.join(out_dir, "config.json"), {**cfg, "dtype": dtype})
    write_json(os.path.join(out_dir, "train_meta.json"), meta)


def save_state(state_dir: str, drafter, optimizer, state: dict) -> None:
    """state: step, total_steps, sampler, cfg, meta, ... (JSON-able or tensors)."""
    os.makedirs(state_dir, exist_ok=True)
    blob = {"drafter": {k: v.detach().cpu() for k, v in drafter_tensors(drafter).items()},
            "optimizer": optimizer.state_dict(), **state}
    final = os.path.join(state_dir, STATE_FILE)
    torch.save(blob, final + ".tmp")
    _replace(final + ".tmp", final)


def load_resume(path: str) -> dict:
    """{"kind": "state"|"weights", "cfg", "weights", "meta", ...state fields}; see module doc."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"--resume {path!r} is not a folder")
    st = os.path.join(path, STATE_FILE)
    if os.path.isfile(st):
        blob = torch.load(st, map_location="cpu", weights_only=False)
        return {"kind": "state", "weights": blob.pop("drafter"), **blob}
    cfg_fn, w_fn = os.path.join(path, "config.json"), os.path.join(path, "model.safetensors")
    if not (os.path.isfile(cfg_fn) and os.path.isfile(w_fn)):
        raise FileNotFoundError(f"--resume {path!r} holds neither {STATE_FILE} nor an exported "
                                "drafter (config.json + model.safetensors)")
    with open(cfg_fn) as f:
        cfg = json.load(f)
    cfg.pop("dtype", None)
    meta = {}
    meta_fn = os.path.join(path, "train_meta.json")
    if os.path.isfile(meta_fn):
        with open(meta_fn) as f:
            meta = json.load(f)
    weights = {k: v.float() for k, v in load_file(w_fn).items()}
    return {"kind": "weights", "cfg": cfg, "weights": weights, "meta": meta}
