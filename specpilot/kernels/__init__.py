"""Triton kernels: functions on tensors, no knowledge of requests or schedulers.

- attention.py: attention over the paged KV cache (decode, extend/verify, tree bitmask, drafter
  block), split-KV with a merge kernel; metadata read on device so launches are graph-safe.

Kernels compile for the GPU; on a CPU-only machine they run only under TRITON_INTERPRET=1, which
triton reads when a kernel is *decorated* (module import), not when it is launched.
"""
