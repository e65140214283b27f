"""L2 prefetch of weight bytes ahead of the kernel that reads them (Hopper's
``cp.async.bulk.prefetch.L2``). Experimental: the engine issues it only when
``$SPECPILOT_L2_PREFETCH`` is set (layers/linear.py).

Why: `ar` at one request alternates GEMVs that stream their weights near the HBM rate with short
kernels (norms, the Gated DeltaNet recurrence, attention, the boundaries between launches) during
which HBM is nearly idle: on Qwen3.8-27B the linear layers alone take 10.67 ms (W12) / 12.43 ms
(bf16) per token as one chain of kernels, the whole step 12.09 / 14.18 ms (H200,
docs/benchmarks/w12.md, session 28). A prefetch issued right after a GEMV for the head of the next
GEMV's weights could fill L2 during that idle time, so the next GEMV reads those bytes from L2.
``scripts/gpu_l2_prefetch_probe.py`` measures whether it does.

The instruction is a hint: it returns at once, the memory system fetches the bytes into L2 on
its own, and it writes nothing, so no output can depend on it. Each prefetch is one contiguous
run of bytes; its address and size must be multiples of 16.

* ``prefetch_rows(t, nbytes, rows=None)``: the first ``nbytes`` of each of the first ``rows`` rows
  of a 2-D tensor (the K-head of every row: what every program of a one-wave GEMV reads first).
* ``prefetch_head(t, nbytes)``: the first ``nbytes`` of a tensor's storage (whole leading rows:
  what the first programs read).
* ``weight_prefetcher(w, mode, amount)``: a function that prefetches the head of a linear layer's
  weight (bf16 ``[N, K]`` or W12 planes) in the order our GEMV walks K; ``parse_setting`` reads
  the ``$SPECPILOT_L2_PREFETCH`` form of (mode, amount).
The prefetches take CUDA tensors only (a ValueError otherwise); each launches one small kernel.
"""

from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the argument checks still run
    triton = None
    tl = None

ALIGN = 16          # cp.async.bulk: address and size in multiples of 16 bytes
BLOCK_ROWS = 32     # rows (prefetches) per program: one warp, one row per thread, so that a
                    # prefetch spreads over many SMs' copy engines
HEAD_CHUNK = 1 << 13  # prefetch_head: bytes per prefetch instruction (16 MB: 64 programs)
MAX_BYTES = (1 << 31) - ALIGN   # one instruction's size operand is 32 bits

# one prefetch per element where the mask is set; the result (always 0) only anchors the asm
PREFETCH_PTX = ("{ .reg .pred p; setp.ne.u32 p, $3, 0; "
                "@p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }")

if triton is not None:
    _PREFETCH_PTX = tl.constexpr(PREFETCH_PTX)   # a kernel reads only constexpr globals

    @triton.jit
    def _prefetch_rows_kernel(base, n_rows, row_stride, nbytes, BLOCK: tl.constexpr):
        """Rows [pid * BLOCK, pid * BLOCK + BLOCK) of ``base`` (bytes): one prefetch of
        ``nbytes`` at the start of each row (row_stride bytes apart)."""
        r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ptrs = base + r.to(tl.int64) * row_stride
        size = tl.zeros([BLOCK], dtype=tl.int32) + nbytes
        tl.inline_asm_elementwise(_PREFETCH_PTX, "=r,l,r,r",
                                  [ptrs, size, (r < n_rows).to(tl.int32)],
                                  dtype=tl.int32, is_pure=False, pack=1)


def _check(t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor) or not t.is_cuda:
        raise ValueError("L2 prefetch takes a CUDA tensor")
    if triton is None:
        raise RuntimeError("L2 prefetch needs Triton (pip install triton)")
    if t.data_ptr() % ALIGN:
        raise ValueError(f"L2 prefetch needs a {ALIGN}-byte aligned tensor")


def _launch(base: torch.Tensor, n_rows: int, row_stride: int, nbytes: int) -> None:
    if n_rows <= 0 or nbytes <= 0:
        return
    grid = (triton.cdiv(n_rows, BLOCK_ROWS),)
    _prefetch_rows_kernel[grid](base, n_rows, row_stride, nbytes, BLOCK=BLOCK_ROWS,
                                num_warps=max(1, BLOCK_ROWS // 32))


def row_plan(t: torch.Tensor, nbytes: int, rows: int | None = None) -> tuple:
    """(rows, row stride in bytes, bytes per row) that ``prefetch_rows`` issues: ``nbytes`` rounded
    down to a multiple of 16 and capped at the row's length; rows capped at the tensor's."""
    if t.dim() != 2 or t.stride(1) != 1:
        raise ValueError(f"prefetch_rows takes a 2-D tensor with contiguous rows, got shape "
                         f"{tuple(t.shape)} strides {t.stride()}")
    stride = t.stride(0) * t.element_size()
    if stride % ALIGN:
        raise ValueError(f"prefetch_rows needs rows {ALIGN}-byte aligned, the row stride is "
                         f"{stride} bytes")
    n = t.shape[0] if rows is None else max(0, min(int(rows), t.shape[0]))
    per_row = min(int(nbytes), t.shape[1] * t.element_size(), MAX_BYTES) // ALIGN * ALIGN
    return n, stride, per_row


def prefetch_rows(t: torch.Tensor, nbytes: int, rows: int | None = None) -> None:
    """Prefetch into L2 the first ``nbytes`` bytes (rounded down to 16) of each of the first
    ``rows`` rows (default all) of the 2-D CUDA tensor ``t``."""
    _check(t)
    n, stride, per_row = row_plan(t, nbytes, rows)
    _launch(t.view(torch.uint8), n, stride, per_row)   # the kernel steps in bytes


MODES = ("rows", "head")


def parse_setting(text: str | None) -> tuple | None:
    """``"rows:<weights per row>"`` or ``"head:<MB>"`` -> (mode, amount: weights per row or
    bytes); empty / None / "0" / "off" -> None. Anything else is a ValueError."""
    text = (text or "").strip().lower()
    if text in ("", "0", "off", "none"):
        return None
    mode, _, value = text.partition(":")
    try:
        amount = float(value)
    except ValueError:
        amount = -1.0
    if mode not in MODES or amount <= 0:
        raise ValueError(f"L2 prefetch setting {text!r}: expected 'rows:<weights per row>' or "
                         f"'head:<MB>' (or 'off')")
    return mode, int(amount) if mode == "rows" else int(amount * (1 << 20))


def weight_prefetcher(w, mode: str, amount: int):
    """A function issuing the L2 prefetch of the head of one linear layer's weight ``w``: a bf16
    ``[N, K]`` CUDA tensor or W12 planes (anything with ``L``, ``H`` and ``Kp``, as
    ``w12.kernel.W12Planes``). ``mode`` "rows": the first ``amount`` weights of every row in the
    order our GEMV and the W12 kernels walk K (split halves: K-step j reads columns j.. and
    Kp/2 + j.. of L (bf16: of the weight) and j.. of H), i.e. the heads of both halves; "head":
    the first ``amount`` bytes of the storage (W12: 2/3 from L, 1/3 from H)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if hasattr(w, "L") and hasattr(w, "H"):
        if mode == "rows":
            half = w.Kp // 2
            return lambda: (prefetch_rows(w.L, amount // 2),
                            prefetch_rows(w.L[:, half:], amount // 2),
                            prefetch_rows(w.H, amount // 2))
        return lambda: (prefetch_head(w.L, amount * 2 // 3), prefetch_head(w.H, amount // 3))
    if mode == "rows":   # 2 B a weight: amount bytes are amount / 2 weights of each half
        half = -(-w.shape[1] // 32) * 16
        return lambda: (prefetch_rows(w, amount), prefetch_rows(w[:, half:], amount))
    return lambda: prefetch_head(w, amount)


def head_plan(t: torch.Tensor, nbytes: int) -> tuple:
    """(instructions, bytes each) that ``prefetch_head`` issues over the first ``nbytes`` of
    ``t``'s storage (capped at its size; the last partial chunk rounded down to 16)."""
    if not t.is_contiguous():
        raise ValueError("prefetch_head takes a contiguous tensor")
    total = min(int(nbytes), t.numel() * t.element_size()) // ALIGN * ALIGN
    return total // HEAD_CHUNK, HEAD_CHUNK, total % HEAD_CHUNK


def prefetch_head(t: torch.Tensor, nbytes: int) -> None:
    """Prefetch into L2 the first ``nbytes`` bytes of the contiguous CUDA tensor ``t``."""
    _check(t)
    n_full, chunk, rest = head_plan(t, nbytes)
    flat = t.reshape(-1).view(torch.uint8)
    _launch(flat, n_full, chunk, chunk)
    if rest:
        _launch(flat[n_full * chunk:], 1, chunk, rest)
