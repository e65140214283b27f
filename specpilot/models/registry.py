"""Model classes keyed by the `architectures` string of a Hugging Face config.json."""

import importlib

_REGISTRY: dict = {}


def register(architecture: str, cls) -> None:
    _REGISTRY[architecture] = cls


def resolve(hf_config):
    """Returns the model class for the config's first supported architecture, or raises."""
    for module in ("llama", "qwen3_5", "muse_glimmer"):   # each registers its classes
        importlib.import_module(f"specpilot.models.{module}")

    archs = list(getattr(hf_config, "architectures", None) or [])
    for arch in archs:
        if arch in _REGISTRY:
            return _REGISTRY[arch]
    raise ValueError(f"unsupported architecture(s) {archs or '(none in config.json)'}; "
                     f"supported: {sorted(_REGISTRY)}")
