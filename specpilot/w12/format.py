"""W12-v1: lossless 12-bit storage of bf16 weight matrices (CPU reference encoder/decoder).

Layout follows docs/w12.md (and the design study, section 2.1):

* bf16 word, high to low: ``s e7..e1 | e0 m6..m0``.
* Plane L ``uint8[N, Kp]``: the bf16 low byte verbatim (``e0 m6..m0``).
* Plane H ``uint8[N, Kp/2]``: nibble ``s d2 d1 d0`` with ``d = (e >> 1) - hb``; split-halves
  pairing: byte ``(n, j)`` holds element ``j`` in its low nibble and ``j + Kp/2`` in its high one.
* ``hb`` (7-bit half-exponent base, per tensor or per row): window = exponents
  ``[2*hb, 2*hb + 14]`` (15 usable); ``d == 7 and e0 == 1`` (exponent ``2*hb + 15``) is the
  reserved ESCAPE code, which decodes to signed zero (sign from the nibble).
* Exact +-0 outside the window use the escape code and need no side entry.
* Any other value outside the window is escaped: ESCAPE code in the planes, exact bf16 bits in a
  per-tile CSR list (tiles of ``TILE_N`` rows x ``TILE_K`` columns, row-major tile order).
  Entry = int32 ``(local_offset << 16) | bf16_bits`` with ``local_offset = r*TILE_K + c``.
* Reconstruction: ``word = s<<15 | (d + hb)<<8 | L``; escape -> ``s<<15``; then patch escapes.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

FORMAT_NAME = "W12-v1"
TILE_N = 64          # escape tile rows
TILE_K = 512         # escape tile columns (local offset < 2**15 fits 16 bits)
PAD_K = 32           # K padded to a multiple of 32 -> H rows are 16-byte multiples
HB_MAX = 120         # 2*hb + 15 <= 255
ESC_THRESHOLD = 1e-3  # escape rate above which per-row bases are tried, then bf16 is kept


@dataclass
class W12Tensor:
    shape: tuple          # original shape ([N, K] after flattening trailing dims)
    L: torch.Tensor       # uint8 [N, Kp]
    H: torch.Tensor       # uint8 [N, Kp // 2]
    hb: torch.Tensor      # uint8 [1] (per tensor) or [N] (per row)
    esc_off: torch.Tensor  # int32 [n_tiles + 1] CSR offsets
    esc: torch.Tensor     # int32 [n_esc] packed (local << 16) | bf16 bits

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= int(s)
        return n

    @property
    def n_escapes(self) -> int:
        return int(self.esc.numel())

    @property
    def escape_rate(self) -> float:
        return self.n_escapes / max(1, self.numel)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.L, self.H, self.hb, self.esc_off, self.esc))

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.nbytes / max(1, self.numel)

    @property
    def per_row(self) -> bool:
        return self.hb.numel() > 1


def _u16(x: torch.Tensor) -> torch.Tensor:
    """bf16 tensor -> int32 tensor holding the raw 16 bits (0..65535)."""
    if x.dtype != torch.bfloat16:
        raise TypeError(f"W12 encodes bf16 tensors, got {x.dtype}")
    return x.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF


def _as_2d(x: torch.Tensor) -> torch.Tensor:
    if x.dim() == 1:
        return x.reshape(1, -1)
    return x.reshape(x.shape[0], -1)


def choose_hb(u: torch.Tensor, per_row: bool) -> torch.Tensor:
    """Best half-exponent base (max coverage of non-zero exponents; ties -> larger magnitudes).

    ``u``: int32 [N, K] raw bits. Returns int32 [1] or [N].
    """
    e = (u >> 7) & 0xFF
    nz = ((u & 0x7FFF) != 0).to(torch.int64)
    rows = u.shape[0] if per_row else 1
    ridx = torch.arange(u.shape[0]).unsqueeze(1).expand_as(e) if per_row else torch.zeros_like(e)
    hist = torch.zeros(rows * 256, dtype=torch.int64)
    hist.scatter_add_(0, (ridx * 256 + e).reshape(-1).to(torch.int64), nz.reshape(-1))
    hist = hist.view(rows, 256)
    c = torch.cat([torch.zeros(rows, 1, dtype=torch.int64), hist.cumsum(1)], dim=1)  # [rows, 257]
    h = torch.arange(HB_MAX + 1)
    cov = c[:, 2 * h + 15] - c[:, 2 * h]                  # [rows, 121]
    # argmax, ties toward larger h: flip, argmax (first max), unflip
    best = HB_MAX - cov.flip(1).argmax(1)
    return best.to(torch.int32)


def encode(x: torch.Tensor, per_row: bool = False) -> W12Tensor:
    """Encode a bf16 tensor (>= 1 dim; trailing dims flattened into K) into W12-v1."""
    shape = tuple(x.shape)
    x2 = _as_2d(x)
    N, K = x2.shape
    Kp = ((K + PAD_K - 1) // PAD_K) * PAD_K
    u = _u16(x2)
    if Kp != K:  # padding is +0, which is free
        u = torch.nn.functional.pad(u, (0, Kp - K))
    hb = choose_hb(u[:, :K], per_row)
    hbc = hb.view(-1, 1)
    s = u >> 15
    e = (u >> 7) & 0xFF
    low = u & 0xFF
    inwin = (e >= 2 * hbc) & (e <= 2 * hbc + 14)
    zero = (u & 0x7FFF) == 0
    side = ~inwin & ~zero                                  # needs an exact side entry
    d = torch.where(inwin, (e >> 1) - hbc, torch.full_like(e, 7))
    lo = torch.where(inwin, low, torch.full_like(low, 0x80))
    nib = (s << 3) | d
    half = Kp // 2
    H = (nib[:, :half] | (nib[:, half:] << 4)).to(torch.uint8)
    L = lo.to(torch.uint8)

    # escape CSR per (TILE_N x TILE_K) tile, row-major tile order, sorted by local offset
    n_tk = (Kp + TILE_K - 1) // TILE_K
    n_tiles = ((N + TILE_N - 1) // TILE_N) * n_tk
    rr, cc = side.nonzero(as_tuple=True)
    tile = (rr // TILE_N) * n_tk + cc // TILE_K
    local = (rr % TILE_N) * TILE_K + cc % TILE_K
    order = torch.argsort(tile * (TILE_N * TILE_K) + local)
    tile, local = tile[order], local[order]
    vals = u[rr[order], cc[order]]
    esc = ((local << 16) | vals).to(torch.int32)
    counts = torch.bincount(tile, minlength=n_tiles)
    esc_off = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]).to(torch.int32)
    return W12Tensor(shape, L.contiguous(), H.contiguous(), hb.to(torch.uint8), esc_off, esc)


def decode(w: W12Tensor) -> torch.Tensor:
    """Reference decoder: rebuild the exact bf16 bits (NaN payloads included)."""
    N, Kp = w.L.shape
    H = w.H.to(torch.int32)
    nib = torch.cat([H & 0xF, H >> 4], dim=1)             # [N, Kp]
    low = w.L.to(torch.int32)
    hb = w.hb.to(torch.int32).view(-1, 1)
    s = nib >> 3
    d = nib & 7
    word = (s << 15) | ((d + hb) << 8) | low
    is_esc = (d == 7) & (low >= 0x80)
    word = torch.where(is_esc, s << 15, word)
    return _patch_and_finish(w, word)


def _patch_and_finish(w: W12Tensor, word: torch.Tensor) -> torch.Tensor:
    """Write the exact escape values into int32 ``word [N, Kp]``, crop K and view as bf16."""
    N, Kp = word.shape
    if w.esc.numel():
        n_tk = (Kp + TILE_K - 1) // TILE_K
        counts = (w.esc_off[1:] - w.esc_off[:-1]).to(torch.int64)
        tile = torch.repeat_interleave(torch.arange(counts.numel()), counts)
        ent = w.esc.to(torch.int64)
        local = ent >> 16
        rows = (tile // n_tk) * TILE_N + local // TILE_K
        cols = (tile % n_tk) * TILE_K + local % TILE_K
        word[rows, cols] = (ent & 0xFFFF).to(torch.int32)
    N0 = w.shape[0] if len(w.shape) > 1 else 1
    K = w.numel // max(1, N0)
    word = word[:, :K]
    word = word - ((word >> 15) << 16)                    # to signed 16-bit range
    return word.to(torch.int16).contiguous().view(torch.bfloat16).reshape(w.shape)


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Exact equality of bf16 bit patterns (NaN payloads and signed zeros included)."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        a.contiguous().view(torch.int16), b.contiguous().view(torch.int16))


def encode_auto(x: torch.Tensor, threshold: float = ESC_THRESHOLD):
    """Per-tensor base; if escapes exceed ``threshold`` try per-row; if still over, return None
    (the caller keeps the tensor bf16). Returns (W12Tensor | None, per-tensor escape rate)."""
    w = encode(x, per_row=False)
    if w.escape_rate <= threshold:
        return w, w.escape_rate
    wr = encode(x, per_row=True)
    if wr.escape_rate <= threshold:
        return wr, w.escape_rate
    return None, min(w.escape_rate, wr.escape_rate)


def decode_swar(w: W12Tensor) -> torch.Tensor:
    """CPU emulation of the planned kernel decode: two weights per 32-bit word (SWAR).

    Lane 0 holds element ``j``, lane 1 element ``j + Kp/2`` (split-halves pairing), so one H byte
    and two L bytes build one bf16x2 word with shifts, masks and one add (no per-element widening).
    """
    N, Kp = w.L.shape
    half = Kp // 2
    L = w.L.to(torch.int64)
    h = w.H.to(torch.int64)
    lo = L[:, :half] | (L[:, half:] << 16)                  # bytes -> lanes 0 and 2
    n8 = ((h & 0xF) | ((h & 0xF0) << 12)) << 8              # nibbles -> byte lanes 1 and 3
    hb = w.hb.to(torch.int64).view(-1, 1)
    dsum = (n8 & 0x07000700) + hb * 0x01000100             # d + hb per lane, <= 127: no carry
    sign = (n8 & 0x08000800) << 4                           # bit 11 -> 15, bit 27 -> 31
    word = lo | dsum | sign
    esc = (n8 >> 2) & (n8 >> 1) & n8 & ((lo << 1) & 0x01000100) & 0x01000100  # d == 7 and e0
    word = word & ~((esc >> 8) * 0x7FFF)                    # escape -> signed zero
    flat = torch.cat([word & 0xFFFF, word >> 16], dim=1).to(torch.int32)  # [N, Kp]
    return _patch_and_finish(w, flat)
