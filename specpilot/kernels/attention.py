"""Attention over the paged KV cache in Triton: one kernel family for decode, extend/verify,
tree verify (ancestor bitmask) and the drafter's block pass, plus a split-KV merge kernel.

Layout (see engine/kv_cache.py): k_cache, v_cache [num_slots, Hkv, D]; req_to_token [rows, W]
holds the slot of position p of the request in table row r at [r, p]. Queries are flat rows
q [T, Hq, D]; request b owns rows q_start_b .. q_start_b + ext_b - 1 ("new rows") at positions
prefix_b .. prefix_b + ext_b - 1, and has kv_len_b = prefix_b + ext_b keys at positions
0 .. kv_len_b - 1.

Where the keys come from: keys at positions < prefix ("prefix keys") are always gathered from the
cache through req_to_token. The new rows' own keys (positions >= prefix) are gathered the same
way, or, with `k_new`/`v_new`, read from the dense [T, Hkv, D] tensors of the new rows (row
q_start + j holds block key j). The dense form is what the drafter needs (its block K/V is never
cached) and saves a table lookup in the engine; both give the same result once the cache holds
the new rows.

Visibility of key p (block index j = p - prefix, negative for prefix keys) to new row i:
  causal:  j <= i                       and, with a window W, i - j < W
  full:    every key                    and, with a window W, |i - j| < W
  tree:    prefix keys always, block key j iff bit j of row i's ancestor words is set; with a
           window W, prefix keys need qpos_i - p < W (qpos_i = q_pos[row] if given, else
           prefix + i); the bitmask alone decides among the new rows.
With qpos = prefix + i these are HF's sliding-window semantics (a query at position t sees keys at
positions > t - W) and DraftAttentionBackend's block rules.

Kernel design. One program handles BLOCK_M (query row, q head) pairs of one request and one KV
head: the G = Hq / Hkv q heads of a KV head are packed with the rows (m = i * G + g), so each K/V
tile is loaded once for the whole GQA group (decode: G rows padded to 16 for tl.dot). The keys a
tile can see, [lo, hi), are split into `num_splits` chunks (flash-decoding), one program each;
with num_splits > 1 every program writes a normalised partial output and its log2-sum-exp, and a
merge kernel combines them, so batch 1 with a long context still fills the GPU. Per-request
lengths are read on device: the grid depends only on (number of requests, Hkv, query-row tiles,
num_splits), so a launch can be captured in a CUDA graph and replayed with new lengths. A request
with kv_len 0 (a padding request) sees no key and writes zeros; it reads nothing.

Accumulation is fp32 (online softmax in base 2); fp32 inputs use IEEE dot products, 16-bit inputs
the tensor cores.

Output gate. With `out_gate` (gated attention: Qwen3.5's and Muse-Glimmer's o * sigmoid(gate))
the kernel that writes the output (the attention kernel, or the merge kernel after a split)
multiplies it in: out = (o rounded to q's dtype) * (sigmoid(gate) rounded to q's dtype), the
product rounded again, as the two torch ops round it; one launch instead of three.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from specpilot.kernels import pdl

_FULL, _CAUSAL, _TREE = 0, 1, 2
_LOG2E = 1.4426950408889634
MAX_SPLITS = 32  # partial outputs one row may be split into
MIN_KEYS_PER_SPLIT = 256  # below this a split's fixed cost outweighs the parallelism it adds
NO_WINDOW = 1 << 30  # "no sliding window": a window wider than any context (one compiled variant)


@dataclass(frozen=True)
class KernelConfig:
    """Tile shape and launch parameters of the attention kernel."""
    block_m: int  # (query row, q head) pairs per program
    block_n: int  # keys per loop iteration
    num_warps: int
    num_stages: int


def default_config(rows_per_program: int, head_dim: int) -> KernelConfig:
    """rows_per_program: the (row, head) pairs one request / KV head has (max ext * G).

    Tile shapes from ptxas's sm_90 resource report (registers <= ~160 and no spills with 16-byte
    aligned strides, as torch allocations are): 64-row tiles at head dim >= 128 need 8 warps, and
    head dim 256 needs 32-key tiles, to stay there. Stages from a timed sweep on the H200 at head
    dim 256 (docs/benchmarks/hybrid.md, run 18): 3 stages against 2 took decode at 8192 keys
    from 42 to 30 us, and the one-split cases at 256 keys from 34 to 21 us (1 row) and, with 4
    warps, from 41 to 26 us (8 rows); smaller head dims were not timed and keep 2.
    """
    block_m = min(64, max(16, triton.next_power_of_2(rows_per_program)))
    block_n = 32 if head_dim > 128 else 64
    num_warps = 8 if block_m >= 64 and head_dim >= 128 else 4
    return KernelConfig(block_m, block_n, num_warps, num_stages=3 if head_dim > 128 else 2)


@functools.lru_cache(maxsize=None)
def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 1
    return torch.cuda.get_device_properties(device).multi_processor_count


def num_kv_splits(programs: int, max_keys: int, device: torch.device) -> int:
    """How many chunks to split each program's keys into: enough programs for two waves of the
    GPU's SMs, chunks of at least MIN_KEYS_PER_SPLIT keys, at most MAX_SPLITS.

    programs: programs without splitting (requests * Hkv * query-row tiles). For a CUDA graph,
    pass max_keys = the table width so the answer depends on the batch shape only.
    """
    want = triton.cdiv(2 * _sm_count(device), max(programs, 1))
    return max(1, min(want, triton.cdiv(max_keys, MIN_KEYS_PER_SPLIT), MAX_SPLITS))


@triton.jit
def _attend_range(acc, m_i, l_i, q, p_lo, p_hi, k_base, v_base, stride_kt, stride_vt,
                  table_row, dense_row0, prefix, rows_i, row_ok, q_pos, tree_row,
                  qk_scale, window, offs_d, d_ok,
                  PAGED: tl.constexpr, MASK_MODE: tl.constexpr, BLOCK_N: tl.constexpr,
                  DOT_PREC: tl.constexpr):
    """Online-softmax update of (acc, m_i, l_i) with keys at positions p_lo .. p_hi - 1.

    PAGED: key p lives in slot table_row[p] of k_base / v_base; else in dense row dense_row0 + p.
    """
    offs_n = tl.arange(0, BLOCK_N)
    for p0 in range(p_lo, p_hi, BLOCK_N):
        p = p0 + offs_n
        in_range = p < p_hi
        if PAGED:
            tok = tl.load(table_row + p, mask=in_range, other=0).to(tl.int64)
        else:
            tok = (dense_row0 + p).to(tl.int64)
        kv_mask = in_range[:, None] & d_ok[None, :]
        k = tl.load(k_base + tok[:, None] * stride_kt + offs_d[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * qk_scale  # [BLOCK_M, BLOCK_N]
        j = p - prefix  # index among the new rows; negative for prefix keys
        visible = in_range[None, :]
        if MASK_MODE == 1:
            visible = visible & (j[None, :] <= rows_i[:, None])
        if MASK_MODE == 2:
            is_new = (j >= 0) & in_range
            words = tl.load(tree_row[:, None] + (j >> 5)[None, :],
                            mask=row_ok[:, None] & is_new[None, :], other=0)
            bit = (words >> (j & 31)[None, :]) & 1
            visible = visible & ((j < 0)[None, :] | (bit != 0))
        if MASK_MODE == 2:
            visible = visible & ((j >= 0)[None, :] | (q_pos[:, None] - p[None, :] < window))
        else:
            dist = rows_i[:, None] - j[None, :]
            visible = visible & (dist < window) & (dist > -window)
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that saw no key yet
        alpha = tl.exp2(m_i - m_safe)
        prob = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(prob, 1)
        v = tl.load(v_base + tok[:, None] * stride_vt + offs_d[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(prob.to(v.dtype), v, input_precision=DOT_PREC)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _gated(out, gate_ptr, offs, mask, out_dtype):
    """(out rounded to out_dtype) * (sigmoid(gate) rounded to out_dtype), in fp32."""
    g = tl.load(gate_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    sg = tl.div_rn(1.0, 1.0 + tl.exp(-g)).to(out_dtype).to(tl.float32)
    return out.to(out_dtype).to(tl.float32) * sg


@triton.jit
def _paged_attention_kernel(
        q_ptr, k_new_ptr, v_new_ptr, k_cache_ptr, v_cache_ptr, table_ptr,
        req_rows_ptr, kv_lens_ptr, ext_lens_ptr, q_starts_ptr, tree_ptr, q_pos_ptr,
        out_ptr, part_ptr, lse_ptr, gate_ptr,
        stride_qt, stride_qh, stride_knt, stride_knh, stride_vnt, stride_vnh,
        stride_kct, stride_kch, stride_vct, stride_vch, stride_table, stride_ot, stride_oh,
        stride_gt, stride_gh, tree_words, num_kv_heads, num_splits, qk_scale, window,
        HEAD_DIM: tl.constexpr, GROUP: tl.constexpr, UNIFORM_EXT: tl.constexpr,
        DENSE_NEW: tl.constexpr, MASK_MODE: tl.constexpr, HAS_QPOS: tl.constexpr,
        SPLIT: tl.constexpr, HAS_GATE: tl.constexpr, BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, DOT_PREC: tl.constexpr,
        PDL: tl.constexpr = 0):
    """Grid (query-row tiles, num_splits, requests * Hkv). UNIFORM_EXT > 0: every request has
    that many rows, request b's start at b * UNIFORM_EXT (ext_lens / q_starts unused)."""
    pdl.start(PDL)   # kernels/pdl.py
    tile = tl.program_id(0)
    split = tl.program_id(1)
    b = tl.program_id(2) // num_kv_heads
    kvh = tl.program_id(2) % num_kv_heads
    if UNIFORM_EXT > 0:
        ext = UNIFORM_EXT
        q_start = b * UNIFORM_EXT
    else:
        ext = tl.load(ext_lens_ptr + b)
        q_start = tl.load(q_starts_ptr + b)
    if tile * BLOCK_M >= ext * GROUP:
        return
    kv_len = tl.load(kv_lens_ptr + b)
    prefix = kv_len - ext

    offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    rows_i = offs_m // GROUP
    heads = kvh * GROUP + offs_m % GROUP
    row_ok = rows_i < ext
    t = (q_start + rows_i).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_DIM
    q = tl.load(q_ptr + t[:, None] * stride_qt + heads[:, None] * stride_qh + offs_d[None, :],
                mask=row_ok[:, None] & d_ok[None, :], other=0.0)

    # Keys any row of this tile may see: [lo, hi), split into equal BLOCK_N-aligned chunks.
    i_first = tile * BLOCK_M // GROUP
    i_last = tl.minimum((tile * BLOCK_M + BLOCK_M - 1) // GROUP, ext - 1)
    hi = kv_len
    if MASK_MODE == 1:
        hi = tl.minimum(kv_len, prefix + i_last + 1)
    if MASK_MODE == 2:
        lo = tl.maximum(prefix - window + 1, 0)  # tree rows sit at positions >= prefix
    else:
        lo = tl.maximum(prefix + i_first - window + 1, 0)
    chunk = tl.cdiv(tl.cdiv(tl.maximum(hi - lo, 0), num_splits), BLOCK_N) * BLOCK_N
    start = lo + split * chunk
    end = tl.minimum(start + chunk, hi)

    q_pos = rows_i
    tree_row = tree_ptr
    if MASK_MODE == 2:
        tree_row = tree_ptr + t * tree_words
        if HAS_QPOS:
            q_pos = tl.load(q_pos_ptr + t, mask=row_ok, other=0).to(tl.int32)
        else:
            q_pos = prefix + rows_i
    table_row = table_ptr + tl.load(req_rows_ptr + b).to(tl.int64) * stride_table
    kc_base = k_cache_ptr + kvh * stride_kch
    vc_base = v_cache_ptr + kvh * stride_vch

    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    if DENSE_NEW:
        acc, m_i, l_i = _attend_range(
            acc, m_i, l_i, q, start, tl.minimum(end, prefix), kc_base, vc_base, stride_kct,
            stride_vct, table_row, 0, prefix, rows_i, row_ok, q_pos, tree_row, qk_scale, window,
            offs_d, d_ok, True, MASK_MODE, BLOCK_N, DOT_PREC)
        acc, m_i, l_i = _attend_range(
            acc, m_i, l_i, q, tl.maximum(start, prefix), end, k_new_ptr + kvh * stride_knh,
            v_new_ptr + kvh * stride_vnh, stride_knt, stride_vnt, table_row, q_start - prefix,
            prefix, rows_i, row_ok, q_pos, tree_row, qk_scale, window, offs_d, d_ok, False,
            MASK_MODE, BLOCK_N, DOT_PREC)
    else:
        acc, m_i, l_i = _attend_range(
            acc, m_i, l_i, q, start, end, kc_base, vc_base, stride_kct, stride_vct, table_row, 0,
            prefix, rows_i, row_ok, q_pos, tree_row, qk_scale, window, offs_d, d_ok, True,
            MASK_MODE, BLOCK_N, DOT_PREC)

    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_safe[:, None]  # no visible key: zeros
    if SPLIT:
        lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.log2(l_safe))
        part = (t * (num_kv_heads * GROUP) + heads) * num_splits + split
        tl.store(part_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], out,
                 mask=row_ok[:, None] & d_ok[None, :])
        tl.store(lse_ptr + part, lse, mask=row_ok)
    else:
        o_mask = row_ok[:, None] & d_ok[None, :]
        if HAS_GATE:
            out = _gated(out, gate_ptr, t[:, None] * stride_gt + heads[:, None] * stride_gh
                         + offs_d[None, :], o_mask, out_ptr.dtype.element_ty)
        tl.store(out_ptr + t[:, None] * stride_ot + heads[:, None] * stride_oh + offs_d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=o_mask)


@triton.jit
def _merge_splits_kernel(part_ptr, lse_ptr, out_ptr, gate_ptr, stride_ot, stride_oh, stride_gt,
                         stride_gh, num_heads, num_splits, HEAD_DIM: tl.constexpr,
                         HAS_GATE: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
                         PDL: tl.constexpr = 0):
    """Grid (T, Hq): out[t, h] = sum_s w_s part[t, h, s] / sum_s w_s with w_s = 2^lse[t, h, s]
    (times the output gate with HAS_GATE)."""
    pdl.start(PDL)   # kernels/pdl.py
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_ok = offs_s < num_splits
    d_ok = offs_d < HEAD_DIM
    base = (t * num_heads + h) * num_splits
    lse = tl.load(lse_ptr + base + offs_s, mask=s_ok, other=float("-inf"))
    m = tl.max(lse, 0)
    w = tl.exp2(lse - tl.where(m == float("-inf"), 0.0, m))
    part = tl.load(part_ptr + (base + offs_s)[:, None] * HEAD_DIM + offs_d[None, :],
                   mask=s_ok[:, None] & d_ok[None, :], other=0.0)
    total = tl.sum(w, 0)
    out = tl.sum(w[:, None] * part, 0) / tl.where(total == 0.0, 1.0, total)
    if HAS_GATE:
        out = _gated(out, gate_ptr, t * stride_gt + h * stride_gh + offs_d, d_ok,
                     out_ptr.dtype.element_ty)
    tl.store(out_ptr + t * stride_ot + h * stride_oh + offs_d, out.to(out_ptr.dtype.element_ty),
             mask=d_ok)


def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    req_to_token: torch.Tensor, req_rows: torch.Tensor, kv_lens: torch.Tensor, *,
                    scale: float, ext: int | None = None, ext_lens: torch.Tensor | None = None,
                    q_starts: torch.Tensor | None = None, max_ext: int | None = None,
                    k_new: torch.Tensor | None = None, v_new: torch.Tensor | None = None,
                    causal: bool = True, window: int | None = None,
                    tree_mask: torch.Tensor | None = None, q_pos: torch.Tensor | None = None,
                    num_splits: int | None = None, max_keys: int | None = None,
                    config: KernelConfig | None = None,
                    out_gate: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of the new rows q [T, Hq, D] over their requests' keys -> [T, Hq, D] (q's dtype).

    Per request b (req_rows, kv_lens: int [B] device tensors): table row req_rows[b] and kv_lens[b]
    keys, the last ext_b of which belong to its own new rows. Row layout, either
      ext: every request has `ext` rows, request b's at b * ext (T = B * ext; graph-friendly), or
      ext_lens, q_starts (int [B]) and max_ext (host int, sizes the grid): ragged rows.
    k_new, v_new [T, Hkv, D]: the new rows' keys/values, read densely instead of from the cache.
    causal: causal among the new rows (else every new row sees every other), unless tree_mask
    (int32 [T, words >= ceil(ext/32)]) is given: bit j of row t's words lets it see block row j.
    window: sliding window (module docstring); q_pos (int [T]): tree rows' positions for it.
    num_splits: split-KV factor; None picks num_kv_splits(..., max_keys) with max_keys (host int,
    the longest kv_len) defaulting to the table width, i.e. a choice that depends on the batch
    shape only (what a CUDA graph needs). config: tile override (default_config).
    out_gate [T, Hq, D] (q's dtype; any view with a contiguous last dim): the output is
    o * sigmoid(out_gate), each factor rounded to q's dtype (module docstring).
    """
    num_tokens, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[1]
    if num_heads % num_kv_heads:
        raise ValueError(f"{num_heads} q heads is not a multiple of {num_kv_heads} kv heads")
    if (ext is None) == (ext_lens is None):
        raise ValueError("give either ext (uniform rows) or ext_lens/q_starts/max_ext")
    if ext_lens is not None and (q_starts is None or max_ext is None):
        raise ValueError("ragged rows need q_starts and max_ext as well as ext_lens")
    if (k_new is None) != (v_new is None):
        raise ValueError("k_new and v_new come together")
    if out_gate is not None and (tuple(out_gate.shape) != tuple(q.shape)
                                 or out_gate.dtype != q.dtype or out_gate.stride(-1) != 1):
        raise ValueError(f"out_gate must be {tuple(q.shape)} in {q.dtype} with a contiguous last "
                         f"dim, got {tuple(out_gate.shape)} {out_gate.dtype}")
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    batch = req_rows.shape[0]
    if num_tokens == 0 or batch == 0:
        return out
    group = num_heads // num_kv_heads
    rows_max = ext if ext is not None else max_ext
    cfg = config or default_config(rows_max * group, head_dim)
    block_d = max(16, triton.next_power_of_2(head_dim))
    tiles = triton.cdiv(rows_max * group, cfg.block_m)
    if num_splits is None:
        num_splits = num_kv_splits(tiles * batch * num_kv_heads,
                                   max_keys if max_keys is not None else req_to_token.shape[1],
                                   q.device)
    split = num_splits > 1
    if split:
        part = torch.empty((num_tokens, num_heads, num_splits, head_dim), dtype=torch.float32,
                           device=q.device)
        lse = torch.empty((num_tokens, num_heads, num_splits), dtype=torch.float32, device=q.device)
    else:
        part = lse = out
    q = q if q.stride(-1) == 1 else q.contiguous()
    dense = k_new is not None
    if dense:
        k_new = k_new if k_new.stride(-1) == 1 else k_new.contiguous()
        v_new = v_new if v_new.stride(-1) == 1 else v_new.contiguous()
    else:
        k_new = v_new = k_cache  # unused
    mode = _TREE if tree_mask is not None else (_CAUSAL if causal else _FULL)
    tree = tree_mask if tree_mask is not None else kv_lens
    gate = out_gate if out_gate is not None else q  # a placeholder, not read without HAS_GATE
    grid = (tiles, num_splits, batch * num_kv_heads)
    _paged_attention_kernel[grid](
        q, k_new, v_new, k_cache, v_cache, req_to_token,
        req_rows, kv_lens, ext_lens if ext_lens is not None else kv_lens,
        q_starts if q_starts is not None else kv_lens, tree, q_pos if q_pos is not None else kv_lens,
        out, part, lse, gate,
        q.stride(0), q.stride(1), k_new.stride(0), k_new.stride(1), v_new.stride(0),
        v_new.stride(1), k_cache.stride(0), k_cache.stride(1), v_cache.stride(0),
        v_cache.stride(1), req_to_token.stride(0), out.stride(0), out.stride(1),
        gate.stride(0), gate.stride(1),
        tree.stride(0) if tree_mask is not None else 0, num_kv_heads, num_splits,
        scale * _LOG2E, window if window is not None else NO_WINDOW,
        HEAD_DIM=head_dim, GROUP=group, UNIFORM_EXT=ext or 0, DENSE_NEW=dense, MASK_MODE=mode,
        HAS_QPOS=q_pos is not None, SPLIT=split, HAS_GATE=out_gate is not None,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_D=block_d,
        DOT_PREC="ieee" if q.dtype == torch.float32 else "tf32",
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **pdl.launch_args(out))
    if split:
        _merge_splits_kernel[(num_tokens, num_heads)](
            part, lse, out, gate, out.stride(0), out.stride(1), gate.stride(0), gate.stride(1),
            num_heads, num_splits, HEAD_DIM=head_dim, HAS_GATE=out_gate is not None,
            BLOCK_S=max(2, triton.next_power_of_2(num_splits)), BLOCK_D=block_d,
            num_warps=4 if head_dim >= 128 else 2, **pdl.launch_args(out))
    return out


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     req_to_token: torch.Tensor, req_rows: torch.Tensor, seq_lens: torch.Tensor, *,
                     scale: float, window: int | None = None,
                     num_splits: int | None = None) -> torch.Tensor:
    """One query row per request, q [B, Hq, D], over slots req_to_token[req_rows[b], :seq_lens[b]]
    (the query's own key included, already cached) -> [B, Hq, D]. seq_lens[b] == 0 (padding)
    gives zeros. num_splits defaults to a choice that depends on (B, Hkv, table width) only, so
    the launch is the same for every step of a captured batch size."""
    return paged_attention(q, k_cache, v_cache, req_to_token, req_rows, seq_lens, scale=scale,
                           ext=1, window=window, num_splits=num_splits)


def tree_mask_words(allowed: torch.Tensor) -> torch.Tensor:
    """Pack a bool ancestor mask [T, ext] (row t may see block row j) into int32 words
    [T, ceil(ext/32)] as the kernels read them (bit j % 32 of word j // 32)."""
    rows, ext = allowed.shape
    words = math.ceil(ext / 32)
    bits = torch.zeros((rows, words * 32), dtype=torch.int64, device=allowed.device)
    bits[:, :ext] = allowed.to(torch.int64)
    weights = torch.ones(32, dtype=torch.int64, device=allowed.device) << torch.arange(
        32, device=allowed.device)
    packed = (bits.view(rows, words, 32) * weights).sum(-1)  # as uint32 in an int64
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)
