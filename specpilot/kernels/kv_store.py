"""KV-cache store in one Triton launch: k_cache[loc[t]] = k[t] and v_cache[loc[t]] = v[t].

Replaces the two index_put launches of `KVCache.store` (engine/kv_cache.py). The copy moves raw
bits: every tensor is reinterpreted as the integer type of its element size, so the result is
the source bit for bit in any dtype (NaN payloads and -0.0 included, fp8 caches too).

Grid (T, head blocks): program (t, j) copies BLOCK_H heads of token t, of k and of v, into slot
loc[t]. k and v are read through (token, head) strides, so views split from a fused qkv output
are read in place; the caches are contiguous [slots, Hkv, D]. No host sync and no data-dependent
shape, so the launch can be captured in a CUDA graph. Slots are not range-checked (that would
need a sync): they must lie in [0, slots). With a slot repeated in loc, the rows' programs
race: each element of that slot ends up holding the same element of one of its rows, which row
is unspecified and may differ between elements and between k and v (as for torch's index_put
on CUDA); the engine repeats only the scratch slot 0 (padding rows), which no request reads.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specpilot.kernels import pdl

MAX_HEAD_DIM = 8192
_TILE = 1024  # elements (heads x padded head dim) of k, and of v, one program copies
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}  # element size -> type


@triton.jit
def _store_kv_kernel(loc_ptr, k_ptr, v_ptr, kc_ptr, vc_ptr,
                     stride_kt, stride_kh, stride_vt, stride_vh, H, D,
                     BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, PDL: tl.constexpr = 0):
    """Grid (T, cdiv(H, BLOCK_H)); see the module docstring."""
    pdl.start(PDL)   # kernels/pdl.py
    t = tl.program_id(0).to(tl.int64)
    heads = (tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)).to(tl.int64)[:, None]
    d = tl.arange(0, BLOCK_D)[None, :]
    ok = (heads < H) & (d < D)
    dst = (tl.load(loc_ptr + t).to(tl.int64) * H + heads) * D + d
    x = tl.load(k_ptr + t * stride_kt + heads * stride_kh + d, mask=ok)
    tl.store(kc_ptr + dst, x, mask=ok)
    x = tl.load(v_ptr + t * stride_vt + heads * stride_vh + d, mask=ok)
    tl.store(vc_ptr + dst, x, mask=ok)


def _bits(x: torch.Tensor) -> torch.Tensor:
    """x (last dim contiguous; a copy only when it is not) viewed as same-size integers."""
    x = x if x.stride(-1) == 1 else x.contiguous()
    return x.view(_BITS[x.element_size()])


def store_kv(k_cache: torch.Tensor, v_cache: torch.Tensor, loc: torch.Tensor, k: torch.Tensor,
             v: torch.Tensor) -> None:
    """k_cache, v_cache [slots, Hkv, D] contiguous, one dtype; loc [T] int32 / int64 slots on
    the caches' device; k, v [T, Hkv, D] of the caches' dtype (any (token, head) strides).
    Writes k[t] to k_cache[loc[t]] and v[t] to v_cache[loc[t]] in place, bit-exact."""
    if k_cache.dim() != 3 or k_cache.shape != v_cache.shape:
        raise ValueError(f"caches must both be [slots, Hkv, D]; got {tuple(k_cache.shape)}, "
                         f"{tuple(v_cache.shape)}")
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("caches must be contiguous")
    if loc.dim() != 1 or loc.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"loc must be [T] int32 / int64; got {tuple(loc.shape)} {loc.dtype}")
    rows = (loc.shape[0], *k_cache.shape[1:])
    if k.shape != rows or v.shape != rows:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must be [T, Hkv, D] = {rows}")
    dtype = k_cache.dtype
    if not (v_cache.dtype == k.dtype == v.dtype == dtype) or k.element_size() not in _BITS:
        raise ValueError(f"k {k.dtype} / v {v.dtype} / caches {dtype} / {v_cache.dtype} must "
                         "share one dtype of 1, 2, 4 or 8 bytes")
    if len({t.device for t in (k_cache, v_cache, loc, k, v)}) != 1:
        raise ValueError("caches, loc, k and v must be on one device")
    t, hkv, dim = rows
    if dim > MAX_HEAD_DIM:
        raise ValueError(f"head dim {dim} > {MAX_HEAD_DIM}")
    if t == 0 or hkv == 0 or dim == 0:
        return
    k, v = _bits(k), _bits(v)
    loc = loc.contiguous()
    block_d = triton.next_power_of_2(dim)
    block_h = max(1, min(triton.next_power_of_2(hkv), _TILE // block_d))
    _store_kv_kernel[(t, triton.cdiv(hkv, block_h))](
        loc, k, v, _bits(k_cache), _bits(v_cache), k.stride(0), k.stride(1), v.stride(0),
        v.stride(1), hkv, dim, BLOCK_H=block_h, BLOCK_D=block_d,
        num_warps=min(max(block_h * block_d // 256, 1), 8), **pdl.launch_args(k_cache))
