"""Model classes keyed by the `architectures` string of a Hugging Face config.json."""

_REGISTRY: dict = {}


def register(architecture: str, cls) -> None:
    _REGISTRY[architecture] = cls


def resolve(hf_config):
    """Returns the model class for the config's first supported architecture, or raises."""
    import specpilot.models.llama  # noqa: F401  (registers on import)
    import specpilot.models.qwen3_5  # noqa: F401
    import specpilot.models.muse_glimmer  # noqa: F401

    archs = list(getattr(hf_config, "architectures", None) or [])
    for arch in archs:
        if arch in _REGISTRY:
            return _REGISTRY[arch]
    raise ValueError(f"unsupported architecture(s) {archs or '(none in config.json)'}; "
                     f"supported: {sorted(_REGISTRY)}")
