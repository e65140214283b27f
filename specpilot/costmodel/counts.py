"""Analytic cost of one decode step: HBM bytes and FLOPs per component, and their roofline floors.

A step of the `ar` engine is one target forward over R rows (one per request), the lm_head of
those rows and sampling. A step of `stock` (spec/stock_worker.py) is: the drafter's block pass
(R x Bd rows), its head over the P proposal slots, the target's verify forward (R x B rows,
features captured), lm_head and acceptance over all R x B rows, the recurrent commit (hybrid
targets) and the drafter's context store of the committed rows (R x tau). Component names equal
the labels profile.py times, so measured and analytic figures meet by name.

Counting rules (dt = bytes per weight / activation element, T = rows of the pass):
  GEMM [T, K] x [K, N]: bytes = N K dt (weights, read once per step) + T K dt (input) +
      T N dt (output; fp32 for logits); FLOPs = 2 T N K. With --weight-format w12 every linear
      weight, target and drafter, is read at W12_BYTES per element, as the engine converts them
      (docs/w12.md: 12-bit planes; the escape index adds ~0.2%); a tied lm_head (the embedding
      table) stays bf16.
  attention, per layer: per request the cached K and V of the context keys (min(L, window) on
      sliding layers; Hkv D dt each) are read once (GQA packed), the new rows' K/V are written to
      the cache and read, q read, o written; FLOPs = 4 T keys Hq D, keys = L + rows (capped at
      the window).
  Gated DeltaNet, per layer and request: fp32 state Hv Dk Dv and conv window C (K-1). A decode
      step reads and writes both. A verify step reads them and stashes every row's conv input,
      k, v, g, beta (C + Hv (Dk + Dv + 2) floats); the commit reads the stash of the accepted rows
      and the committed state again, and writes the new state (replay, engine/state_pool.py).
      FLOPs per row: 2 C K (conv) + 7 Hv Dk Dv (decay, k^T S, update, q S).
  other: the elementwise passes of the target forward over [T, H] (embedding rows, norms,
      residual adds, captured features); a lower bound, FLOPs ignored.
  sample/accept: one fp32 read of the logits (greedy argmax; sampling reads them again).
Floors: max(bytes / bandwidth, FLOPs / matrix rate) per component (FLOPs all at the matrix rate).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

H200_HBM_BW = 4.8e12  # bytes/s, nominal
H200_BF16_FLOPS = 989e12  # dense bf16 FLOP/s, nominal
# nominal (datasheet) rates per settings `gpu` (specpilot.settings.GPUS): (label, bytes/s, dense
# bf16 FLOP/s). h100-80gb is the SXM card (HBM3, the one our H100 runs used; the PCIe card has
# 2.0 TB/s); the RTX PRO 6000's bf16 rate is not a published figure: a quarter of the dense FP4
# rate behind its announced 4000 AI TOPS (sparse FP4); every figure is a ceiling, --measure
# replaces them.
NOMINAL_RATES = {
    "h200-141gb": ("H200", H200_HBM_BW, H200_BF16_FLOPS),
    "h100-80gb": ("H100 80GB SXM", 3.35e12, 989e12),
    "rtxpro6000-96gb": ("RTX PRO 6000", 1.792e12, 500e12),
}
FAMILIES = {  # `architectures` entry -> the model family whose layer structure we count
    "LlamaForCausalLM": "llama", "Qwen3ForCausalLM": "llama",
    "Qwen3_5ForCausalLM": "qwen3_5", "Qwen3_5ForConditionalGeneration": "qwen3_5",
    "MuseGlimmerForCausalLM": "muse_glimmer", "MuseGlimmerForConditionalGeneration": "muse_glimmer",
}
W12_BYTES = 1.5  # bytes per weight element of a W12 linear layer (its two planes)
DELTA_RULE_FLOPS = 7  # per row, per Hv Dk Dv element: see the module docstring


@dataclass(frozen=True)
class Rates:
    """Device ceilings the floors are computed against."""
    bw: float = H200_HBM_BW  # bytes/s
    flops: float = H200_BF16_FLOPS  # FLOP/s


@dataclass(frozen=True)
class Cost:
    """Bytes moved to/from HBM and FLOPs of one component per step (weight_bytes: the part of
    bytes that is weights)."""
    name: str
    bytes: float = 0.0
    flops: float = 0.0
    weight_bytes: float = 0.0

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(self.name, self.bytes + other.bytes, self.flops + other.flops,
                    self.weight_bytes + other.weight_bytes)

    def scaled(self, n: float) -> "Cost":
        return Cost(self.name, self.bytes * n, self.flops * n, self.weight_bytes * n)

    def floor_s(self, rates: Rates) -> float:
        return max(self.bytes / rates.bw, self.flops / rates.flops)

    def bound(self, rates: Rates) -> str:
        return "compute" if self.flops / rates.flops > self.bytes / rates.bw else "memory"


@dataclass(frozen=True)
class GdnShape:
    k_heads: int
    v_heads: int
    dk: int
    dv: int
    conv_kernel: int

    @property
    def conv_dim(self) -> int:
        return 2 * self.k_heads * self.dk + self.v_heads * self.dv


@dataclass(frozen=True)
class TargetShape:
    """What the counts need from a target's config.json (read as models/*.py read it)."""
    family: str
    hidden: int
    intermediate: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    layer_kinds: tuple[str, ...]  # per layer: "full" | "sliding" (attention) | "linear" (GDN)
    window: Optional[int] = None
    tied: bool = False
    gdn: Optional[GdnShape] = None

    @property
    def num_layers(self) -> int:
        return len(self.layer_kinds)

    @property
    def norms_per_layer(self) -> int:
        return 4 if self.family == "muse_glimmer" else 2  # Muse: sandwich norms

    @classmethod
    def from_config(cls, raw: dict) -> "TargetShape":
        archs = raw.get("architectures") or []
        family = next((FAMILIES[a] for a in archs if a in FAMILIES), None)
        if family is None:
            raise ValueError(f"no cost model for architecture(s) {archs}; "
                             f"known: {sorted(FAMILIES)}")
        c = raw.get("text_config") or raw
        n, h, heads = c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"]
        gdn, window = None, None
        if family == "llama":
            kinds = ("full",) * n
        else:
            types = list(c["layer_types"])[:n]
            names = {"full_attention": "full", "sliding_attention": "sliding",
                     "linear_attention": "linear"}
            unknown = sorted(set(types) - set(names))
            if unknown:
                raise ValueError(f"layer types {unknown} have no cost model")
            kinds = tuple(names[t] for t in types)
        if "sliding" in kinds:
            window = int(c["sliding_window"])
        if "linear" in kinds:
            gdn = GdnShape(c["linear_num_key_heads"], c["linear_num_value_heads"],
                           c["linear_key_head_dim"], c["linear_value_head_dim"],
                           c["linear_conv_kernel_dim"])
        return cls(family=family, hidden=h, intermediate=c["intermediate_size"],
                   vocab=c["vocab_size"], heads=heads,
                   kv_heads=c.get("num_key_value_heads") or heads,
                   head_dim=c.get("head_dim") or h // heads, layer_kinds=kinds, window=window,
                   tied=bool(raw.get("tie_word_embeddings", False)), gdn=gdn)


@dataclass(frozen=True)
class Step:
    """Shapes of one decode step. rows: verify rows B per request (1 = ar); draft_rows: the
    drafter's block rows Bd (None = no drafter); accepted: tokens emitted per request per step,
    bonus included (tau; 1 for ar). rows and accepted may be fractional (oracle truncation)."""
    batch: int
    context: int
    rows: float = 1
    accepted: float = 1.0
    draft_rows: Optional[int] = None
    dtype_bytes: int = 2
    weight_format: str = "bf16"  # "w12": every linear weight (target, drafter) at W12_BYTES

    def __post_init__(self):
        if self.weight_format not in ("bf16", "w12"):
            raise ValueError(f"weight_format must be bf16 or w12, got {self.weight_format!r}")

    @classmethod
    def for_engine(cls, drafter, batch: int, context: int, block: Optional[int] = None,
                   accepted: Optional[float] = None, dtype_bytes: int = 2,
                   weight_format: str = "bf16") -> "Step":
        """ar when drafter (a DraftConfig) is None; else B = block or the drafter's own verify
        rows, Bd = B (DFlash) or B - 1 (DSpark), tau = accepted or B (every draft accepted)."""
        if drafter is None:
            return cls(batch, context, 1, 1.0, None, dtype_bytes, weight_format)
        b = block or drafter.num_draft_tokens
        bd = b - 1 if drafter.shifted_labels else b
        return cls(batch, context, b, float(accepted if accepted is not None else b), bd,
                   dtype_bytes, weight_format)

    def linear_bytes(self) -> float:
        """Bytes per element of a linear layer's weight (target and drafter)."""
        return W12_BYTES if self.weight_format == "w12" else self.dtype_bytes

    @property
    def tokens(self) -> float:
        """Tokens generated per step, all requests."""
        return self.batch * self.accepted


def gemm(name: str, m: float, k: int, ns: list[int], dt: int, count: int = 1,
         out_bytes: Optional[int] = None, wb: Optional[float] = None) -> Cost:
    """`count` layers, each with one [m, k] x [k, n] linear per n in ns: each reads its weight
    once (wb bytes per element, default dt) and its input, and writes its output (out_bytes per
    element, default dt)."""
    ob = dt if out_bytes is None else out_bytes
    wb = dt if wb is None else wb
    total = Cost(name)
    for n in ns:
        total += Cost(name, n * k * wb + m * k * dt + m * n * ob, 2 * m * n * k, n * k * wb)
    return total.scaled(count)


def attention(name: str, batch: int, rows: float, context: int, window: Optional[int],
              heads: int, kv_heads: int, head_dim: int, dt: int, count: int) -> Cost:
    """`count` layers of paged attention: `rows` new rows per request over `context` cached keys."""
    t = batch * rows
    keys = context if window is None else min(context, window)
    visible = context + rows if window is None else min(context + rows, window)
    kv_row = 2 * kv_heads * head_dim * dt  # K and V of one position
    nbytes = batch * keys * kv_row + 2 * t * kv_row + 2 * t * heads * head_dim * dt
    return Cost(name, nbytes, 4 * t * visible * heads * head_dim).scaled(count)


def _gdn_state(g: GdnShape) -> tuple[int, int, int]:
    """(state bytes, conv window bytes, stashed bytes per verify row), fp32."""
    state = g.v_heads * g.dk * g.dv * 4
    window = g.conv_dim * (g.conv_kernel - 1) * 4
    row = (g.conv_dim + g.v_heads * (g.dk + g.dv + 2)) * 4
    return state, window, row


def _gdn_row_flops(g: GdnShape) -> int:
    return 2 * g.conv_dim * g.conv_kernel + DELTA_RULE_FLOPS * g.v_heads * g.dk * g.dv


def target_costs(t: TargetShape, s: Step, capture: int = 0) -> list[Cost]:
    """Components of the target pass of step s (rows s.rows per request; verify iff the step
    has a drafter), in forward order. capture: number of target layers whose features are kept."""
    dt, r, wb = s.dtype_bytes, s.batch, s.linear_bytes()
    m = r * s.rows
    n_full, n_sliding = t.layer_kinds.count("full"), t.layer_kinds.count("sliding")
    n_attn, n_gdn = n_full + n_sliding, t.layer_kinds.count("linear")
    qd, kvd = t.heads * t.head_dim, t.kv_heads * t.head_dim
    out: list[Cost] = []
    if n_attn:
        q_out = 2 * qd if t.family == "qwen3_5" else qd  # qwen3_5: query + output gate
        gate = [qd] if t.family == "muse_glimmer" else []  # Muse: gate_proj beside q, k, v
        out += [gemm("attn.qkv", m, t.hidden, [q_out, kvd, kvd] + gate, dt, n_attn, wb=wb),
                gemm("attn.o", m, qd, [t.hidden], dt, n_attn, wb=wb)]
        for kind, count, window in (("full", n_full, None), ("sliding", n_sliding, t.window)):
            if count:
                out.append(attention(f"attention[{kind}]", r, s.rows, s.context, window, t.heads,
                                     t.kv_heads, t.head_dim, dt, count))
        out += [gemm("attn.mlp.gate_up", m, t.hidden, [t.intermediate] * 2, dt, n_attn, wb=wb),
                gemm("attn.mlp.down", m, t.intermediate, [t.hidden], dt, n_attn, wb=wb)]
    if n_gdn:
        g = t.gdn
        vd = g.v_heads * g.dv
        state, window, row = _gdn_state(g)
        verify = s.draft_rows is not None
        per_req = (state + window) * (1 if verify else 2)  # verify: read only, commit writes
        stash = m * row if verify else 0
        acts = m * (g.conv_dim + 2 * vd) * dt  # conv input and z read, output written
        out += [gemm("gdn.in_proj", m, t.hidden, [g.conv_dim, vd, g.v_heads, g.v_heads], dt,
                     n_gdn, wb=wb),
                Cost("gdn.recurrent", r * per_req + stash + acts, m * _gdn_row_flops(g))
                .scaled(n_gdn),
                gemm("gdn.out_proj", m, vd, [t.hidden], dt, n_gdn, wb=wb),
                gemm("gdn.mlp.gate_up", m, t.hidden, [t.intermediate] * 2, dt, n_gdn, wb=wb),
                gemm("gdn.mlp.down", m, t.intermediate, [t.hidden], dt, n_gdn, wb=wb)]
    passes = 2 + t.num_layers * (2 * t.norms_per_layer + 2 * 3) + 2  # embed, norms, adds, final
    out.append(Cost("other", m * t.hidden * dt * (passes + 2 * capture)))
    head_wb = dt if t.tied else wb  # a tied head is the embedding table: stays bf16
    out.append(gemm("lm_head", m, t.hidden, [t.vocab], dt, out_bytes=4, wb=head_wb))
    out.append(Cost("sample/accept", m * t.vocab * 4))
    if n_gdn and s.draft_rows is not None:
        state, window, row = _gdn_state(t.gdn)
        a = r * s.accepted
        out.append(Cost("gdn.commit", a * row + 2 * r * (state + window),
                        a * _gdn_row_flops(t.gdn)).scaled(n_gdn))
    return out


def drafter_costs(d, t: TargetShape, s: Step) -> list[Cost]:
    """The drafter's parts of step s: block pass, head (the target's lm_head over the proposal
    slots), context store of the committed rows. d: a spec.draft_config.DraftConfig."""
    c, dt, r, wb = d.hf, s.dtype_bytes, s.batch, s.linear_bytes()
    h, n = c.hidden_size, c.num_hidden_layers
    hd = getattr(c, "head_dim", None) or h // c.num_attention_heads
    qd, kvd = c.num_attention_heads * hd, c.num_key_value_heads * hd
    bd = s.draft_rows
    m = r * bd
    block = Cost("draft.block", m * h * dt * 2)  # embedding rows of the block
    block += gemm("draft.block", m, h, [qd, kvd, kvd], dt, n, wb=wb)
    block += gemm("draft.block", m, qd, [h], dt, n, wb=wb)
    block += gemm("draft.block", m, h, [c.intermediate_size] * 2, dt, n, wb=wb)
    block += gemm("draft.block", m, c.intermediate_size, [h], dt, n, wb=wb)
    conv_passes = 0
    if d.conv_kernel_size:  # DFlash2: kernel projections of both dynamic convs, and 4 applies
        groups = h // d.conv_group_size
        block += gemm("draft.block", m, h, [2 * d.conv_kernel_size * groups] * 2, dt, n, wb=wb)
        conv_passes = 4 * (d.conv_kernel_size + 1)
    for window in d.layer_window:
        block += attention("draft.block", r, bd, s.context, window, c.num_attention_heads,
                           c.num_key_value_heads, hd, dt, 1)
    block += Cost("draft.block", m * h * dt * (n * (2 * 2 + 2 * 3 + conv_passes) + 2))
    proposals = bd if d.shifted_labels else bd - 1
    p = r * proposals
    head = gemm("draft.head", p, h, [t.vocab], dt, out_bytes=4,
                wb=dt if t.tied else wb)   # the target's lm_head
    head += Cost("draft.head", p * t.vocab * 4)  # argmax / top-k / sampling over the logits
    if d.selector_rank:  # DFlash2: hidden projection, codebook rows of predecessor + candidates
        head += gemm("draft.head", p, h, [d.selector_rank], dt, wb=wb)
        head += Cost("draft.head", p * (1 + d.selector_top_k) * d.selector_rank * dt)
    if d.algorithm == "DSPARK":  # Markov head: W1 row gather, W2 [rank -> V] GEMM per slot
        # (slot j's bias needs slot j - 1's token: W2 is read once per slot, spec/propose.py)
        head += Cost("draft.head", p * d.markov_rank * dt)
        head += gemm("draft.head", r, d.markov_rank, [t.vocab], dt, proposals, out_bytes=4,
                     wb=wb)
    committed = r * s.accepted
    store = gemm("draft.store", committed, len(d.target_layer_ids) * t.hidden, [h], dt, wb=wb)
    store += gemm("draft.store", committed, h, [kvd, kvd], dt, n, wb=wb)
    store += Cost("draft.store", committed * 2 * kvd * dt * n)  # context K/V written
    return [block, head, store]


def step_costs(t: TargetShape, d, s: Step) -> list[Cost]:
    """Every component of step s in execution order (d: DraftConfig or None for ar)."""
    if d is None:
        return target_costs(t, s)
    draft = drafter_costs(d, t, s)
    return draft[:2] + target_costs(t, s, capture=len(d.target_layer_ids)) + draft[2:]


def oracle_step(s: Step) -> Step:
    """The same step verifying only the rows it accepts (rows = tau): the oracle-truncation
    bound of verify_batching.md section 4.3."""
    return replace(s, rows=s.accepted)


def total(costs: list[Cost], name: str = "step") -> Cost:
    out = Cost(name)
    for c in costs:
        out += Cost(name, c.bytes, c.flops, c.weight_bytes)
    return out
