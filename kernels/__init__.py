"""Triton kernels live here (W12 GEMM, attention for decode/verify/tree, GDN helpers, ...).

This folder is installed under the import name `specpilot.kernels` (setuptools package-dir in
pyproject.toml), never as a top-level `kernels`, which would shadow PyPI's `kernels` package.
"""
