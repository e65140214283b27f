"""Build a model from a Hugging Face folder and stream its safetensors weights in.

Checks, each failing at load with the tensor's name: a parameter missing from the checkpoint,
a tensor whose shape differs from the parameter's, a checkpoint tensor no parameter takes.
Tied embeddings: `lm_head.weight` may be absent (or present and ignored).

A folder written by `python -m specpilot.w12 convert` (`model.w12.safetensors`, no bf16
safetensors) loads too: its W12 tensors are decoded bit for bit on the parameter's device
(`specpilot.w12.convert.read_tensor`), so the model holds the original bf16 values; the model
runner then converts the linear layers back to W12 (`--weight-format auto` on such a folder).
"""

from __future__ import annotations

import contextlib
import logging
import os

import torch
from safetensors import safe_open
from transformers import AutoConfig

from specpilot.layers.fused import fuse_projections
from specpilot.models.registry import resolve

log = logging.getLogger(__name__)
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


class WeightLoadError(ValueError):
    pass


def load_hf_config(model_path: str):
    if not os.path.isfile(os.path.join(model_path, "config.json")):
        raise FileNotFoundError(f"{model_path!r} has no config.json (expected a Hugging Face folder)")
    return AutoConfig.from_pretrained(model_path)


def checkpoint_files(model_path: str) -> dict[str, str]:
    """Tensor name -> safetensors file, from the index when sharded; for a W12 checkpoint its
    tensors' original names -> model.w12.safetensors."""
    from specpilot.w12.convert import hf_weight_map, is_w12_checkpoint, w12_files

    if is_w12_checkpoint(model_path):   # (never where a bf16 index or model.safetensors is)
        return w12_files(model_path)
    return hf_weight_map(model_path)


@contextlib.contextmanager
def open_tensors(fn: str):
    """A checkpoint file opened for reading: yields ``get(name, device=None)``, the tensor as
    stored, or for a W12 file (its safetensors metadata has "w12") decoded to bf16 on
    ``device``."""
    from specpilot.w12.convert import read_tensor, w12_meta

    with safe_open(fn, framework="pt") as f:
        if "w12" in (f.metadata() or {}):
            meta = w12_meta(f, fn)
            yield lambda name, device=None: read_tensor(f, meta, name, device)
        else:
            yield lambda name, device=None: f.get_tensor(name)


def load_weights(model: torch.nn.Module, model_path: str) -> None:
    params = dict(model.named_parameters())  # tied weights appear once, under the first name
    tied = getattr(model.config, "tie_word_embeddings", False)
    files = checkpoint_files(model_path)
    missing = sorted(n for n in params if n not in files)
    if missing:
        raise WeightLoadError(f"checkpoint {model_path!r} lacks tensor(s): {', '.join(missing[:8])}"
                              + (f" and {len(missing) - 8} more" if len(missing) > 8 else ""))
    skip = tuple(getattr(model, "ignored_checkpoint_prefixes", ()))  # e.g. a vision tower
    unexpected = sorted(n for n in files if n not in params and not n.endswith(_IGNORED_SUFFIXES)
                        and not (tied and n == "lm_head.weight")
                        and not (skip and n.startswith(skip)))
    if unexpected:
        raise WeightLoadError(f"checkpoint {model_path!r} has tensor(s) the model does not use: "
                              f"{', '.join(unexpected[:8])}")
    by_file: dict[str, list[str]] = {}
    for name in params:
        by_file.setdefault(files[name], []).append(name)
    with torch.no_grad():
        for fn, names in by_file.items():
            with open_tensors(fn) as get:
                for name in names:
                    p = params[name]
                    t = get(name, p.device)
                    if tuple(t.shape) != tuple(p.shape):
                        raise WeightLoadError(f"tensor {name!r} has shape {tuple(t.shape)}, "
                                              f"the model expects {tuple(p.shape)}")
                    p.copy_(t.to(p.dtype))


def instantiate(factory, dtype: torch.dtype, device: torch.device):
    """factory() with parameters created directly in `dtype` on `device` (fp32 buffers such as
    RoPE tables are built explicitly in fp32 and stay so)."""
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            return factory()
    finally:
        torch.set_default_dtype(prev)


@torch.no_grad()
def randomize(model: torch.nn.Module, seed: int = 0) -> None:
    """--load-format dummy: random weights of the real shapes (not zeros, which run faster than
    real data). Matrices ~ N(0, 0.02); norm gains and other vectors keep their constructor values
    (ones, or zeros for (1 + w) norms), except Gated DeltaNet decay A_log ~ log U(1, 16)."""
    gens: dict = {}
    for name, p in model.named_parameters():
        gen = gens.setdefault(p.device, torch.Generator(device=p.device).manual_seed(seed))
        if p.dim() >= 2:
            p.normal_(0.0, 0.02, generator=gen)
        elif name.endswith("A_log"):
            p.uniform_(1.0, 16.0, generator=gen).log_()


def build_model(model_path: str, dtype: torch.dtype, device: torch.device, max_positions: int,
                load_format: str = "auto", hf_config=None):
    """Returns (model in eval mode on device, hf_config). load_format "dummy" needs only
    config.json and fills random weights. hf_config: the folder's config, if already read."""
    hf_config = hf_config or load_hf_config(model_path)
    cls = resolve(hf_config)
    model = instantiate(lambda: cls(hf_config, max_positions), dtype, device)
    if load_format == "dummy":
        randomize(model)
        log.warning("--load-format dummy: %s has RANDOM weights (speed work only)", cls.__name__)
    else:
        load_weights(model, model_path)
        log.info("loaded %s (%s) from %s", cls.__name__, dtype, model_path)
    fuse_projections(model)  # q/k/v(/gate), gate/up, GDN in_proj: one GEMM each
    return model.eval(), hf_config
