"""Counter-based seeded noise for the sampler (engine/sampler.seeded_uniform) in one launch.

For R rows x n columns, row r, column c gets
    x = h(row_hash[r] ^ h((offset + c) mod 2**32)),   u = ((x >> 9) + 1/2) * 2**-23   (fp32)
where h is sampler._hash32 (xorshift-multiply, 2 rounds, on 32 bits) and row_hash[r] the key's
hash the host computed (sampler._row_hash); u, or -log(u) (Exp(1) noise), is written to
out[dest[r], c], so seeded rows land straight in the caller's noise tensor. The integers are
uint32 with wrapping multiplies, which equals the torch path's int64 (x * MUL) & (2**32 - 1):
the uniforms are bit-identical to the torch path on every device. -log(u) uses libdevice's logf
on the GPU (tl.log lowers to the approximate lg2, too coarse near u = 1), tl.log in the
interpreter (which has no libdevice): a few ulp from torch's log at most.

Grid (R, cdiv(n, BLOCK)): program (r, j) writes columns j * BLOCK .. j * BLOCK + BLOCK - 1 of
row r. A pure function of (row hash, counter): no generator state, graph-safe.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

_BLOCK = 1024  # columns one program writes
_HASH_MUL = tl.constexpr(0x045D9F3B)  # sampler._HASH_MUL


@triton.jit
def _hash32(x):
    """sampler._hash32 on uint32 (the multiply wraps mod 2**32)."""
    x = (x ^ (x >> 16)) * _HASH_MUL
    x = (x ^ (x >> 16)) * _HASH_MUL
    return x ^ (x >> 16)


@triton.jit
def _seeded_noise_kernel(info_ptr, out_ptr, R, n, offset, stride_o, stride_c,
                         EXPONENTIAL: tl.constexpr, LIBDEVICE_LOG: tl.constexpr,
                         BLOCK: tl.constexpr):
    """Grid (R, cdiv(n, BLOCK)); info int64 [2, R]: row hashes in [0, 2**32), destination rows."""
    r = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < n
    row_hash = tl.load(info_ptr + r).to(tl.uint32)
    dest = tl.load(info_ptr + R + r)  # int64
    counter = (cols.to(tl.int64) + offset).to(tl.uint32)  # truncation: mod 2**32
    x = _hash32(_hash32(counter) ^ row_hash)
    u = ((x >> 9).to(tl.float32) + 0.5) * (1.0 / 8388608.0)  # exact: 2**-23
    if EXPONENTIAL:
        if LIBDEVICE_LOG:
            u = -libdevice.log(u)
        else:
            u = -tl.log(u)
    tl.store(out_ptr + dest * stride_o + cols.to(tl.int64) * stride_c, u, mask=ok)


def seeded_noise_(out: torch.Tensor, info: torch.Tensor, offset: int,
                  exponential: bool) -> torch.Tensor:
    """out [*, n] fp32: out[info[1, r], c] <- u (or -log u) of row hash info[0, r], counter
    offset + c, for every r < info.shape[1]; other rows untouched. info: int64 [2, R] on out's
    device. Returns out."""
    if out.dtype != torch.float32 or out.dim() != 2:
        raise ValueError(f"seeded_noise_: out must be fp32 [rows, n], got {out.dtype} "
                         f"{tuple(out.shape)}")
    if info.dtype != torch.int64 or info.dim() != 2 or info.shape[0] != 2:
        raise ValueError(f"seeded_noise_: info must be int64 [2, R], got {info.dtype} "
                         f"{tuple(info.shape)}")
    r, n = info.shape[1], out.shape[1]
    if r == 0 or n == 0:
        return out
    _seeded_noise_kernel[(r, triton.cdiv(n, _BLOCK))](
        info.contiguous(), out, r, n, offset, out.stride(0), out.stride(1),
        EXPONENTIAL=exponential, LIBDEVICE_LOG=out.is_cuda, BLOCK=_BLOCK, num_warps=4)
    return out
