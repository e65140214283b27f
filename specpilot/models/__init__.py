"""Plain nn.Modules with Hugging Face parameter names; `registry` maps `architectures` to classes."""
