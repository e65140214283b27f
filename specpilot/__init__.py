"""SpecPilot: a single-GPU speculative-decoding LLM server in SGLang's style."""

__version__ = "0.1.0"
