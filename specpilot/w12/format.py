"""W12-v2: lossless 12-bit storage of bf16 weight matrices (encoder and CPU decoders).

Normative description: docs/w12.md. In short:

* bf16 word, high to low: ``s e7..e1 | e0 m6..m0``; "hi7" = ``e >> 1`` (7 bits).
* Plane L ``uint8[N, Kp]``: the bf16 low byte verbatim (``e0 m6..m0``), 0 for an escape.
* Plane H ``uint8[N, Kp/2]``: per weight a 3-bit code ``d`` and its sign. Code ``d`` in 0..6
  means ``hi7 = hb + d``; code 7 means ``hi7 = 0`` (signed zero, subnormals and the smallest
  normal binade are stored exactly with it) and is also the escape code (with L = 0 it decodes
  to signed zero). ``hb`` (per tensor or per row) places the 14-exponent window
  ``[2*hb, 2*hb + 13]``.
* H is packed in 32-bit little-endian words, one per 4 pair columns ``4q..4q+3``. Pair column
  ``c`` stands for the two weights ``c`` ("first half", a) and ``Kp/2 + c`` (b). With
  ``i = c - 4q``: ``d(a_i)`` in bits ``4i..4i+2``, ``d(b_i)`` in bits ``16+4i..16+4i+2``,
  ``sign(a_i)`` in bit ``8i+7``, ``sign(b_i)`` in bit ``8i+3``. This is the layout the GPU
  decode wants: masking the sign bits out leaves the codes as ``prmt`` byte selectors of an
  8-byte table ``T[d] = hb + d, T[7] = 0``, and the sign bits already sit at bit 7 of each
  selected byte (a's) or 4 bits below it (b's).
* Decode: ``word = s << 15 | T[d] << 8 | L``; then the escape side list (per 64 x 512 tile,
  CSR) overwrites escapes with their exact bits.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

FORMAT_NAME = "W12-v2"
TILE_N = 64          # escape tile rows
TILE_K = 512         # escape tile columns (local offset < 2**15 fits 16 bits)
PAD_K = 32           # K padded to a multiple of 32 -> H rows are 16-byte multiples
D_WINDOW = 7         # codes 0..6 are window exponents; code 7 is hi7 = 0 (zero / escape)
ZCODE = 7
HB_MAX = 127 - (D_WINDOW - 1)  # hb + 6 <= 127
ESC_THRESHOLD = 1e-3  # escape rate above which per-row bases are tried, then bf16 is kept
CHUNK = 1 << 24      # weights per encode step (bounds the temporaries of huge tensors)


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
    return x.reshape(x.shape[0], math.prod(x.shape[1:]))   # not -1: an empty tensor has no K


def _row_chunks(N: int, K: int):
    """Row ranges of about ``CHUNK`` weights each (multiples of TILE_N rows)."""
    step = max(TILE_N, (CHUNK // max(1, K)) // TILE_N * TILE_N)
    for r0 in range(0, N, step):
        yield r0, min(N, r0 + step)


def choose_hb(x2: torch.Tensor, per_row: bool) -> torch.Tensor:
    """Best base (max window coverage of the weights with ``hi7 != 0``, which code 7 stores for
    free; ties -> larger magnitudes). ``x2``: bf16 [N, K]. Returns int32 [1] or [N]."""
    N, K = x2.shape
    dev = x2.device
    rows = N if per_row else 1
    hist = torch.zeros(rows * 128, dtype=torch.int64, device=dev)
    for r0, r1 in _row_chunks(N, K):
        hi7 = (_u16(x2[r0:r1]) >> 8) & 0x7F
        cnt = (hi7 != 0).to(torch.int64)
        if per_row:
            idx = torch.arange(r0, r1, device=dev).unsqueeze(1) * 128 + hi7
        else:
            idx = hi7
        hist.scatter_add_(0, idx.reshape(-1).to(torch.int64), cnt.reshape(-1))
    hist = hist.view(rows, 128)
    c = torch.cat([torch.zeros(rows, 1, dtype=torch.int64, device=dev), hist.cumsum(1)], dim=1)
    h = torch.arange(HB_MAX + 1, device=dev)
    cov = c[:, h + D_WINDOW] - c[:, h]                    # [rows, HB_MAX + 1]
    best = HB_MAX - cov.flip(1).argmax(1)                 # first max of the flipped = largest h
    return best.to(torch.int32)


def _shifts(dev):
    i = torch.arange(4, device=dev, dtype=torch.int64)
    return 4 * i, 16 + 4 * i, 8 * i + 7, 8 * i + 3, 8 * i


def pack_h(d: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Codes ``d`` and signs ``s`` (int [N, Kp]) -> plane H uint8 [N, Kp/2] (module doc)."""
    N, Kp = d.shape
    half = Kp // 2
    da, db, sa, sb, byte = _shifts(d.device)
    g = lambda t: t.reshape(N, half // 4, 4).to(torch.int64)  # noqa: E731
    word = ((g(d[:, :half]) << da) | (g(d[:, half:]) << db) | (g(s[:, :half]) << sa)
            | (g(s[:, half:]) << sb)).sum(-1, keepdim=True)   # disjoint bits: sum == or
    return ((word >> byte) & 0xFF).to(torch.uint8).reshape(N, half)


def _words(b: torch.Tensor) -> torch.Tensor:
    """uint8 [N, 4q] -> int64 [N, q]: each 4 bytes as one little-endian 32-bit word."""
    N, n = b.shape
    return (b.reshape(N, n // 4, 4).to(torch.int64) << _shifts(b.device)[4]).sum(-1)


def unpack_h(H: torch.Tensor):
    """Plane H -> (d, s) int32 [N, Kp]."""
    N, half = H.shape
    da, db, sa, sb, _ = _shifts(H.device)
    word = _words(H).unsqueeze(-1)
    f = lambda sh, m: ((word >> sh) & m).reshape(N, half)  # noqa: E731
    d = torch.cat([f(da, 7), f(db, 7)], dim=1)
    s = torch.cat([f(sa, 1), f(sb, 1)], dim=1)
    return d.to(torch.int32), s.to(torch.int32)


def encode(x: torch.Tensor, per_row: bool = False) -> W12Tensor:
    """Encode a bf16 tensor (>= 1 dim; trailing dims flattened into K) into W12-v2, on the
    tensor's device, ``CHUNK`` weights at a time."""
    shape = tuple(x.shape)
    x2 = _as_2d(x)
    N, K = x2.shape
    dev = x2.device
    Kp = ((K + PAD_K - 1) // PAD_K) * PAD_K
    hb = choose_hb(x2, per_row)
    L = torch.empty((N, Kp), dtype=torch.uint8, device=dev)
    H = torch.empty((N, Kp // 2), dtype=torch.uint8, device=dev)
    esc_rows, esc_cols, esc_vals = [], [], []
    for r0, r1 in _row_chunks(N, K):
        u = _u16(x2[r0:r1])
        if Kp != K:  # padding is +0: code 7, L = 0, free
            u = torch.nn.functional.pad(u, (0, Kp - K))
        hbc = hb[r0:r1].view(-1, 1) if per_row else hb.view(1, 1)
        hi7 = (u >> 8) & 0x7F
        inwin = (hi7 >= hbc) & (hi7 < hbc + D_WINDOW)
        low = hi7 == 0                                    # exact under code 7 (L verbatim)
        d = torch.where(inwin, hi7 - hbc, torch.full_like(hi7, ZCODE))
        L[r0:r1] = torch.where(inwin | low, u & 0xFF, torch.zeros_like(u)).to(torch.uint8)
        H[r0:r1] = pack_h(d, u >> 15)
        rr, cc = (~inwin & ~low).nonzero(as_tuple=True)   # escapes: code 7, L = 0, side entry
        esc_rows.append(rr + r0)
        esc_cols.append(cc)
        esc_vals.append(u[rr, cc])
    rr = torch.cat(esc_rows) if esc_rows else torch.zeros(0, dtype=torch.int64, device=dev)
    cc = torch.cat(esc_cols) if esc_cols else torch.zeros(0, dtype=torch.int64, device=dev)
    vals = torch.cat(esc_vals) if esc_vals else torch.zeros(0, dtype=torch.int32, device=dev)

    # escape CSR per (TILE_N x TILE_K) tile, row-major tile order, sorted by local offset
    n_tk = (Kp + TILE_K - 1) // TILE_K
    n_tiles = ((N + TILE_N - 1) // TILE_N) * n_tk
    tile = (rr // TILE_N) * n_tk + cc // TILE_K
    local = (rr % TILE_N) * TILE_K + cc % TILE_K
    order = torch.argsort(tile * (TILE_N * TILE_K) + local)
    tile, local, vals = tile[order], local[order], vals[order]
    esc = ((local << 16) | vals.to(torch.int64)).to(torch.int32)
    counts = torch.bincount(tile, minlength=n_tiles)
    esc_off = torch.cat([torch.zeros(1, dtype=torch.int64, device=dev), counts.cumsum(0)]).to(torch.int32)
    return W12Tensor(shape, L, H, hb.to(torch.uint8), esc_off, esc)


def decode(w: W12Tensor) -> torch.Tensor:
    """Reference decoder: rebuild the exact bf16 bits (NaN payloads included)."""
    d, s = unpack_h(w.H)
    hb = w.hb.to(torch.int32).view(-1, 1)
    hi7 = torch.where(d == ZCODE, torch.zeros_like(d), d + hb)
    word = (s << 15) | (hi7 << 8) | w.L.to(torch.int32)
    return _patch_and_finish(w, word)


def row_slice(w: W12Tensor, r0: int, r1: int) -> W12Tensor:
    """Rows [r0, r1) of a W12 tensor as a W12 tensor of their own (r0 a multiple of TILE_N; the
    escape list cut at the escape tiles' rows, its offsets rebased)."""
    if r0 % TILE_N or not 0 <= r0 < r1 <= w.L.shape[0]:
        raise ValueError(f"row_slice: needs 0 <= r0 < r1 <= {w.L.shape[0]} and r0 a multiple "
                         f"of {TILE_N}; got {r0}, {r1}")
    n_tk = (w.L.shape[1] + TILE_K - 1) // TILE_K
    t0, t1 = (r0 // TILE_N) * n_tk, ((r1 + TILE_N - 1) // TILE_N) * n_tk
    off = w.esc_off[t0:t1 + 1]
    esc = w.esc[int(off[0]):int(off[-1])]
    hb = w.hb if w.hb.numel() == 1 else w.hb[r0:r1]
    shape = tuple(w.shape) if len(w.shape) == 1 else (r1 - r0,) + tuple(w.shape[1:])  # 1-D: one row
    return W12Tensor(shape, w.L[r0:r1], w.H[r0:r1], hb, off - off[0], esc)


def decode_chunked(w: W12Tensor, device=None) -> torch.Tensor:
    """``decode`` on ``device`` (default: the planes'), about ``CHUNK`` weights at a time, so
    a huge tensor's int32 temporaries stay bounded (an lm_head of 248320 x 5120 would take
    ~15 GB at once); the same bits."""
    dev = torch.device(device) if device is not None else w.L.device
    N = w.L.shape[0]
    out = torch.empty((N, w.numel // max(1, N)), dtype=torch.bfloat16, device=dev)
    for r0, r1 in _row_chunks(N, w.L.shape[1]):
        part = row_slice(w, r0, r1)
        part = W12Tensor(part.shape, *(getattr(part, f).to(dev) for f in
                                       ("L", "H", "hb", "esc_off", "esc")))
        out[r0:r1] = decode(part).reshape(r1 - r0, -1)
    return out.reshape(w.shape)


def _patch_and_finish(w: W12Tensor, word: torch.Tensor) -> torch.Tensor:
    """Write the exact escape values into int32 ``word [N, Kp]``, crop K and view as bf16."""
    N, Kp = word.shape
    if w.esc.numel():
        n_tk = (Kp + TILE_K - 1) // TILE_K
        counts = (w.esc_off[1:] - w.esc_off[:-1]).to(torch.int64)
        tile = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts)
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
    """Exact equality of bit patterns (NaN payloads and signed zeros included), for tensors of
    any dtype and shape (0-d and odd-length byte tensors too): their raw bytes."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


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


def _prmt(a: torch.Tensor, b: torch.Tensor, sel: torch.Tensor) -> torch.Tensor:
    """PTX ``prmt.b32`` (default mode, selector bit 3 clear) on int64 tensors holding uint32."""
    a, b, sel = torch.broadcast_tensors(a, b, torch.as_tensor(sel, device=a.device))
    out = torch.zeros_like(a)
    for i in range(4):
        k = (sel >> (4 * i)) & 7
        src = torch.where(k < 4, a, b)
        out |= ((src >> (8 * (k & 3))) & 0xFF) << (8 * i)
    return out


def decode_swar(w: W12Tensor) -> torch.Tensor:
    """CPU emulation of the GPU decode (``kernel.DECODE_PTX``), word for word: per H word (8
    weights) a table ``T = (hb, hb+1, .., hb+6, 0)`` in two registers, one ``prmt`` lookup per 4
    codes, the sign bits or-ed in place, and one ``prmt`` per two output weights."""
    N, Kp = w.L.shape
    half = Kp // 2
    h = _words(w.H)
    l0, l1 = _words(w.L[:, :half]), _words(w.L[:, half:])
    hb4 = w.hb.to(torch.int64).view(-1, 1) * 0x01010101
    t0 = hb4 + 0x03020100
    t1 = (hb4 + 0x00060504) & 0x00FFFFFF
    m = h & 0x77777777
    ha = _prmt(t0, t1, m) | (h & 0x80808080)
    hbb = _prmt(t0, t1, m >> 16) | ((h << 4) & 0x80808080)
    words = [_prmt(l0, ha, 0x5140), _prmt(l0, ha, 0x7362), _prmt(l1, hbb, 0x5140),
             _prmt(l1, hbb, 0x7362)]
    lanes = [torch.stack([wd & 0xFFFF, wd >> 16], -1) for wd in words]      # [N, q, 2] each
    first = torch.cat(lanes[:2], -1).reshape(N, half)
    second = torch.cat(lanes[2:], -1).reshape(N, half)
    return _patch_and_finish(w, torch.cat([first, second], 1).to(torch.int32))
