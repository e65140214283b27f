"""Triton paged attention (specpilot/kernels/attention.py, engine/triton_backend.py) against the
torch references: TorchNativeBackend, DraftAttentionBackend and dense-mask SDPA, fp32.

On a machine without CUDA the kernels run in Triton's interpreter (see _use_interpreter).
"""

from __future__ import annotations

import importlib
import os
import random

import pytest
import torch
import torch.nn.functional as F

from specpilot.engine.attention_backend import TorchNativeBackend
from specpilot.engine.kv_cache import KVCache, ReqToTokenTable
from specpilot.spec.draft_attention import DraftAttentionBackend


def _use_interpreter() -> None:
    """Make Triton kernels run in the interpreter (CPU-only machine).

    Triton reads TRITON_INTERPRET when a function is decorated with @triton.jit, not at launch:
    its own standard library (tl.sum, tl.max, tl.cdiv, ...) is decorated when triton.language
    is first imported, our kernels when specpilot.kernels.attention is. Setting the variable
    before anything imports triton is enough; but other test modules import triton first
    (transformers does, through torch._dynamo), so when the already-decorated functions are
    compiled-mode ones, the modules holding them are reloaded here to re-decorate them. A reload
    reuses the module's namespace, so every wrapper sees the re-decorated kernels.
    """
    os.environ["TRITON_INTERPRET"] = "1"
    import triton.language as tl
    from triton.language import random as tl_random, standard
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    if not isinstance(tl.sum, InterpretedFunction):
        for module in (standard, tl_random):
            importlib.reload(module)
            for name, value in vars(module).items():
                if isinstance(value, InterpretedFunction) and isinstance(getattr(tl, name, None),
                                                                         JITFunction):
                    setattr(tl, name, value)
    from specpilot.kernels import attention as kernels

    if not isinstance(kernels._paged_attention_kernel, InterpretedFunction):
        importlib.reload(kernels)


if not torch.cuda.is_available():
    _use_interpreter()

from specpilot.engine.triton_backend import TritonBackend, TritonDraftAttentionBackend  # noqa: E402
from specpilot.kernels import attention  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
D = 64
SCALE = D ** -0.5
TOL = dict(rtol=1e-4, atol=1e-5)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


class PagedBatch:
    """Random requests in a paged KV cache: request i has prefix_lens[i] cached positions in a
    shuffled table row, over shuffled (non-contiguous) slots; slots for its new rows are
    allocated (loc) and entered in the table, as the runner does before a forward."""

    def __init__(self, prefix_lens, ext_lens, hq, hkv, seed=0, dtype=torch.float32):
        g = torch.Generator().manual_seed(seed)
        total = sum(prefix_lens) + sum(ext_lens)
        self.kv = KVCache(1, total + 8, hkv, D, dtype, DEVICE)
        self.kv.k[0].copy_(torch.randn(self.kv.k[0].shape, generator=g))
        self.kv.v[0].copy_(torch.randn(self.kv.v[0].shape, generator=g))
        self.table = ReqToTokenTable(len(prefix_lens) + 3, max(prefix_lens) + max(ext_lens) + 5,
                                     DEVICE)
        self.rows = (torch.randperm(len(prefix_lens) + 3, generator=g)[:len(prefix_lens)]).tolist()
        slots = (torch.randperm(total, generator=g) + 1).tolist()  # slot 0 is scratch
        loc = []
        for row, p, e in zip(self.rows, prefix_lens, ext_lens):
            mine, slots = slots[:p + e], slots[p + e:]
            self.table.table[row, :p + e] = torch.tensor(mine)
            loc += mine[p:]
        self.loc = torch.tensor(loc, dtype=torch.int64, device=DEVICE)
        t = sum(ext_lens)
        self.q = torch.randn((t, hq, D), generator=g).to(DEVICE, dtype)
        self.k = torch.randn((t, hkv, D), generator=g).to(DEVICE, dtype)
        self.v = torch.randn((t, hkv, D), generator=g).to(DEVICE, dtype)
        self.prefix_lens, self.ext_lens = list(prefix_lens), list(ext_lens)

    def run(self, backend_cls, window=None, **prepare_kw):
        backend = backend_cls(self.kv, self.table)
        backend.prepare(self.rows, self.prefix_lens, self.ext_lens, self.loc, **prepare_kw)
        return backend.forward(self.q, self.k, self.v, 0, SCALE, window)

    def dense_reference(self, allowed_new, window=None, positions=None):
        """SDPA per request with an explicit mask: prefix keys visible (windowed against the
        row's position), new key j visible to new row i iff allowed_new[t_i][j]."""
        self.kv.store(0, self.loc, self.k, self.v)
        out, start = torch.empty_like(self.q), 0
        for row, p, e in zip(self.rows, self.prefix_lens, self.ext_lens):
            slots = self.table.table[row, :p + e]
            qpos = positions[start:start + e] if positions is not None else p + torch.arange(e)
            keys = torch.arange(p + e)
            mask = torch.zeros(e, p + e, dtype=torch.bool)
            mask[:, :p] = True
            if window is not None:
                mask[:, :p] &= qpos[:, None] - keys[None, :p] < window
            mask[:, p:] = allowed_new[start:start + e, :e]
            o = F.scaled_dot_product_attention(
                self.q[start:start + e].transpose(0, 1), self.kv.k[0][slots].transpose(0, 1),
                self.kv.v[0][slots].transpose(0, 1), attn_mask=mask.to(DEVICE), scale=SCALE,
                enable_gqa=True)
            out[start:start + e] = o.transpose(0, 1)
            start += e
        return out


# prefix 0, and lengths around and across the 64-key tile.
PREFIXES = [0, 5, 63, 70, 150]


@pytest.mark.parametrize("group", [1, 3])
@pytest.mark.parametrize("window", [None, 7])
@pytest.mark.parametrize("ext", [1, 3, 8])
def test_backend_matches_torch(group, window, ext):
    batch = PagedBatch(PREFIXES, [ext] * len(PREFIXES), hq=2 * group, hkv=2, seed=ext)
    ref = batch.run(TorchNativeBackend, window)
    out = batch.run(TritonBackend, window)
    torch.testing.assert_close(out, ref, **TOL)


@pytest.mark.parametrize("window", [None, 4])
def test_ragged_extend_with_long_rows(window):
    """Mixed new-row counts (a prefill chunk longer than a row tile next to decodes)."""
    batch = PagedBatch([0, 9, 40, 3], [1, 30, 1, 6], hq=6, hkv=2, seed=3)
    torch.testing.assert_close(batch.run(TritonBackend, window),
                               batch.run(TorchNativeBackend, window), **TOL)


@pytest.mark.parametrize("splits", [1, 2, 5])
@pytest.mark.parametrize("window", [None, 50])
def test_forced_splits_uniform_rows_with_padding(splits, window):
    """Split-KV + merge at a fixed split count (the backend picks 1-2 on CPU), uniform rows
    (the graph-friendly layout) with a padding request (kv_len 0) in the middle."""
    batch = PagedBatch([0, 150, 70], [3, 3, 3], hq=6, hkv=2, seed=splits)
    ref = batch.run(TorchNativeBackend, window)
    rows = batch.rows[:2] + [0] + batch.rows[2:]
    kv_lens = [p + 3 for p in batch.prefix_lens]
    meta = torch.tensor([rows, kv_lens[:2] + [0] + kv_lens[2:]], dtype=torch.int32, device=DEVICE)
    q = torch.cat([batch.q[:6], torch.randn(3, 6, D, device=DEVICE), batch.q[6:]])
    out = attention.paged_attention(q, batch.kv.k[0], batch.kv.v[0], batch.table.table,
                                    meta[0], meta[1], scale=SCALE, ext=3, window=window,
                                    num_splits=splits)  # all keys through the table
    torch.testing.assert_close(torch.cat([out[:6], out[9:]]), ref, **TOL)
    assert torch.equal(out[6:9], torch.zeros(3, 6, D, device=DEVICE))


@pytest.mark.parametrize("splits", [None, 1, 4])
@pytest.mark.parametrize("window", [None, 9])
def test_decode_with_padding(splits, window):
    """decode_attention over req_to_token[row, :seq_len]; seq_len 0 = padding -> zeros."""
    seq = [17, 0, 130, 1, 0, 64]
    live = [n for n in seq if n]
    batch = PagedBatch([n - 1 for n in live], [1] * len(live), hq=6, hkv=2, seed=11)
    batch.kv.store(0, batch.loc, batch.k, batch.v)
    ref = batch.run(TorchNativeBackend, window)
    q = torch.randn(len(seq), 6, D, device=DEVICE)
    rows, it = [], iter(range(len(live)))
    for i, n in enumerate(seq):
        if n:
            j = next(it)
            q[i] = batch.q[j]
            rows.append(batch.rows[j])
        else:
            rows.append(0)
    out = attention.decode_attention(
        q, batch.kv.k[0], batch.kv.v[0], batch.table.table,
        torch.tensor(rows, dtype=torch.int32, device=DEVICE),
        torch.tensor(seq, dtype=torch.int32, device=DEVICE), scale=SCALE, window=window,
        num_splits=splits)
    live_rows = [i for i, n in enumerate(seq) if n]
    torch.testing.assert_close(out[live_rows], ref, **TOL)
    assert torch.equal(out[[i for i, n in enumerate(seq) if not n]],
                       torch.zeros(2, 6, D, device=DEVICE))


@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_out_gate_equals_torch_gating(splits, dtype):
    """out_gate (gated attention's o * sigmoid(gate)) in the kernel that writes the output, the
    attention kernel itself (1 split) or the merge kernel: the torch ops' result, each factor
    rounded to the output dtype. The gate is a strided view, as a fused projection gives it."""
    batch = PagedBatch([0, 40, 9], [3, 3, 3], hq=6, hkv=2, seed=21, dtype=dtype)
    batch.kv.store(0, batch.loc, batch.k, batch.v)
    meta = torch.tensor([batch.rows, [p + 3 for p in batch.prefix_lens]], dtype=torch.int32,
                        device=DEVICE)
    wide = (torch.randn(9, 6, 2 * D, generator=torch.Generator().manual_seed(5)) * 3).to(
        DEVICE, dtype)
    gate = wide[:, :, D:]  # [T, Hq, D], row stride 12 * D, head stride 2 * D
    kw = dict(scale=SCALE, ext=3, num_splits=splits)
    args = (batch.q, batch.kv.k[0], batch.kv.v[0], batch.table.table, meta[0], meta[1])
    plain = attention.paged_attention(*args, **kw)
    gated = attention.paged_attention(*args, **kw, out_gate=gate)
    want = plain * torch.sigmoid(gate)
    if dtype == torch.float32:
        torch.testing.assert_close(gated, want, rtol=1e-6, atol=1e-6)
    else:  # the sigmoid's last fp32 bit may round the fp16 factor the other way
        torch.testing.assert_close(gated, want, rtol=2e-3, atol=1e-4)
        assert (gated == want).float().mean() > 0.98
    with pytest.raises(ValueError, match="out_gate"):
        attention.paged_attention(*args, **kw, out_gate=gate.float() if dtype != torch.float32
                                  else gate.half())


def test_backend_gate_argument(monkeypatch):
    """TritonBackend.forward(..., gate=g) == forward(...) * sigmoid(g), the torch backend's rule,
    with the fused kernel epilogue and with FUSE_OUT_GATE off."""
    from specpilot.engine import triton_backend

    batch = PagedBatch(PREFIXES, [2] * len(PREFIXES), hq=4, hkv=2, seed=8)
    gate = torch.randn(batch.q.shape, generator=torch.Generator().manual_seed(9)).to(DEVICE)

    def run(cls):
        backend = cls(batch.kv, batch.table)
        backend.prepare(batch.rows, batch.prefix_lens, batch.ext_lens, batch.loc)
        return backend.forward(batch.q, batch.k, batch.v, 0, SCALE, None, gate=gate)

    ref = run(TorchNativeBackend)
    torch.testing.assert_close(run(TritonBackend), ref, **TOL)
    monkeypatch.setattr(triton_backend, "FUSE_OUT_GATE", False)
    torch.testing.assert_close(run(TritonBackend), ref, **TOL)


def random_tree(ext: int, rng: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tree over rows 0..ext-1 (parents before children, row 0 the root):
    (ancestor-or-self bool mask [ext, ext], depth [ext])."""
    allowed = torch.zeros(ext, ext, dtype=torch.bool)
    depth = torch.zeros(ext, dtype=torch.int64)
    for i in range(ext):
        if i:
            parent = rng.randrange(i)
            allowed[i] = allowed[parent]
            depth[i] = depth[parent] + 1
        allowed[i, i] = True
    return allowed, depth


def ragged_masks(ext_lens, make):
    """Stack per-request [e, e] masks into [T, max ext] rows (unused columns False)."""
    width = max(ext_lens)
    rows = []
    for e in ext_lens:
        m = torch.zeros(e, width, dtype=torch.bool)
        m[:, :e] = make(e)
        rows.append(m)
    return torch.cat(rows)


@pytest.mark.parametrize("window", [None, 6])
@pytest.mark.parametrize("group", [1, 3])
def test_tree_mask_matches_dense_sdpa(window, group):
    rng = random.Random(group)
    ext_lens = [8, 3, 40, 1]  # 40 rows: two mask words
    batch = PagedBatch([0, 70, 12, 5], ext_lens, hq=2 * group, hkv=2, seed=5)
    trees = [random_tree(e, rng) for e in ext_lens]
    it = iter(trees)
    allowed = ragged_masks(ext_lens, lambda e: next(it)[0])
    positions = torch.cat([p + d for p, (_, d) in zip(batch.prefix_lens, trees)])
    ref = batch.dense_reference(allowed, window, positions)
    out = batch.run(TritonBackend, window, tree_mask=attention.tree_mask_words(allowed).to(DEVICE),
                    tree_positions=positions.to(DEVICE))
    torch.testing.assert_close(out, ref, **TOL)


def chain_mask(e: int, window: int | None) -> torch.Tensor:
    """Causal chain as an ancestor mask; a tree mask carries the window among new rows itself."""
    i = torch.arange(e)
    dist = i[:, None] - i[None, :]
    return (dist >= 0) & (dist < (window or e))


@pytest.mark.parametrize("window", [None, 5])
def test_causal_equals_lower_triangular_tree(window):
    ext_lens = [8, 3, 33]
    batch = PagedBatch([4, 0, 66], ext_lens, hq=6, hkv=2, seed=8)
    tril = ragged_masks(ext_lens, lambda e: chain_mask(e, window))
    positions = torch.cat([p + torch.arange(e) for p, e in zip(batch.prefix_lens, ext_lens)])
    causal = batch.run(TritonBackend, window)
    tree = batch.run(TritonBackend, window, tree_mask=attention.tree_mask_words(tril).to(DEVICE),
                     tree_positions=positions.to(DEVICE))
    if window is None:  # without a window the dense reference is the torch backend itself
        torch.testing.assert_close(causal, batch.run(TorchNativeBackend), **TOL)
    torch.testing.assert_close(tree, causal, rtol=1e-5, atol=1e-6)


def test_tree_mask_words_bit_layout():
    allowed = torch.zeros(2, 40, dtype=torch.bool)
    allowed[0, [0, 31]] = True
    allowed[1, [32, 39]] = True
    words = attention.tree_mask_words(allowed)
    assert words.dtype == torch.int32 and words.shape == (2, 2)
    assert words.tolist() == [[1 - 2**31, 0], [0, 1 + 2**7]]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [None, 3])
@pytest.mark.parametrize("group", [1, 3])
def test_draft_block_matches_reference(causal, window, group):
    ctx, bd, hkv = [0, 7, 70], 4, 2
    batch = PagedBatch(ctx, [bd] * len(ctx), hq=group * hkv, hkv=hkv, seed=21)
    outs = []
    for cls in (DraftAttentionBackend, TritonDraftAttentionBackend):
        backend = cls(batch.kv, batch.table).prepare_block(batch.rows, ctx, bd)
        outs.append(backend.attend(batch.q, batch.k, batch.v, 0, SCALE, causal, window))
    torch.testing.assert_close(outs[1], outs[0], **TOL)


# ----------------------------------------------------------------------------- tiny model runs

def _swap_backends(eng) -> None:
    """Point an OfflineEngine's target (and drafter, if any) at the Triton backends."""
    runner = eng.runner
    runner.backend = TritonBackend(runner.kv, runner.req_to_token)
    if eng.worker is not runner:
        eng.worker.backend = TritonDraftAttentionBackend(eng.worker.draft_kv, runner.req_to_token)


def _record_proposals(eng) -> list:
    """Wrap the stock worker's proposer to keep every step's draft tokens."""
    seen, propose = [], eng.worker.proposer

    def recording(*args):
        prop = propose(*args)
        seen.append(prop.tokens.tolist())
        return prop

    eng.worker.proposer = recording
    return seen


@pytest.fixture(scope="module")
def tiny_muse(tmp_path_factory):
    """Tiny Muse-Glimmer target (sliding window 8 on 3 of 4 layers, GQA 2) and a DFlash2
    drafter (non-causal, window 6): windows, prefix and rollback edges all get crossed."""
    from tests.e2e.tiny_drafters import make_drafter
    from tests.e2e.tiny_muse import HIDDEN, LAYERS, VOCAB, make_tiny_muse

    target = make_tiny_muse(tmp_path_factory.mktemp("muse"))
    draft = make_drafter("dflash2", tmp_path_factory.mktemp("dflash2"), hidden=HIDDEN,
                         vocab=VOCAB, mask=VOCAB - 1, num_target_layers=LAYERS,
                         target_layers=(1, 4, 7))
    return target, draft


def _engine(path, **kw):
    from specpilot.config import ServerArgs
    from specpilot.offline import OfflineEngine

    return OfflineEngine(ServerArgs(model_path=path, device=str(DEVICE), dtype="float32",
                                    max_total_tokens=512, chunked_prefill_size=7, **kw))


def _prompts():
    rng = random.Random(5)
    return [[rng.randrange(3, 250) for _ in range(n)] for n in (1, 6, 19)]


def test_greedy_model_output_matches_torch_backend(tiny_muse):
    from specpilot.core import SamplingParams

    greedy = SamplingParams(temperature=0, max_new_tokens=6, ignore_eos=True)
    ref = [o.output_ids for o in _engine(tiny_muse[0]).generate(_prompts(), greedy)]
    eng = _engine(tiny_muse[0])
    _swap_backends(eng)
    assert [o.output_ids for o in eng.generate(_prompts(), greedy)] == ref


def test_stock_drafts_match_torch_backends(tiny_muse):
    """Same drafts step by step (the drafter's block pass) and the same output (verify)."""
    from specpilot.core import SamplingParams

    greedy = SamplingParams(temperature=0, max_new_tokens=5, ignore_eos=True)
    runs = []
    for swap in (False, True):
        eng = _engine(tiny_muse[0], speculative_draft_model_path=tiny_muse[1],
                      speculative_num_draft_tokens=4)
        if swap:
            _swap_backends(eng)
        drafts = _record_proposals(eng)
        runs.append(([o.output_ids for o in eng.generate(_prompts(), greedy)], drafts))
    assert runs[1] == runs[0]


@pytest.mark.gpu
def test_bf16_on_gpu_matches_torch():
    """Compiled kernels (not the interpreter) in bf16 against the torch backend."""
    batch = PagedBatch([0, 300, 1000, 37], [8, 8, 8, 8], hq=24, hkv=4, seed=2,
                       dtype=torch.bfloat16)
    for window in (None, 256):
        ref = batch.run(TorchNativeBackend, window)
        out = batch.run(TritonBackend, window)
        assert rel_err(out, ref) < 1e-2
