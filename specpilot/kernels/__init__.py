"""Triton kernels: functions on tensors, no knowledge of requests or schedulers.

- attention.py: attention over the paged KV cache (decode, extend/verify, tree bitmask, drafter
  block), split-KV with a merge kernel; metadata read on device so launches are graph-safe.
- gdn.py: the gated delta rule (Gated DeltaNet) over the state pool in place: decode, verify
  (no state write), extend, and the verify commit of every layer in one launch.
- conv.py: Gated DeltaNet's short causal conv + SiLU over the conv-window pool (decode, verify).
- rope.py: rotary embedding of q and k in one launch (partial rotary, strided views, an optional
  query gain folded in).
- kv_store.py: the KV cache store, k and v into their slots in one launch (bit-exact copy).
- noise.py: the sampler's seeded uniforms / Exp(1) noise, a counter-based hash in one launch.
- norm.py: RMSNorm (plain, zero-centred, optional fused residual add), gated RMSNorm, SiLU-mul.
- dynconv.py: DFlash2's grouped dynamic causal conv around a drafter sub-layer, one launch per
  side, reading the raw coefficient projection.

Kernels compile for the GPU; on a CPU-only machine they run only under TRITON_INTERPRET=1, which
triton reads when a kernel is *decorated* (module import), not when it is launched.
"""
