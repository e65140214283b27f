"""Recurrent state of hybrid targets (Gated DeltaNet): one slot per request-table row, fp32.

For every recurrent layer l and table row r: conv[l, r] [C, K-1] (the last K-1 conv inputs) and
rec[l, r] [H, Dk, Dv] (the delta-rule state). A request's state always describes exactly its
first kv_len positions (the committed prefix), like its KV pages; a request that starts from
position 0 starts from zeros, so rows need no clearing when they are reused.

Per forward the runner hands the model a RecurrentBatch (through the attention backend):
  EXTEND / DECODE: each layer reads the state, runs its rows and writes the state back.
  VERIFY: the committed state is left untouched; each layer stashes its per-row inputs
      (conv inputs [B, C]; k, v, g, beta of the delta rule). After acceptance, commit(accepted)
      replays rows 0..a of each request from the committed state (replay, not a per-row state
      snapshot: B x (C + H(Dk + Dv + 2)) floats stashed per layer instead of B x H Dk Dv).

RecurrentBatch is the torch reference: a Python loop over requests (and, in delta_rule, rows).
TensorRecurrentBatch computes the same with batched tensor ops and the Triton kernel of
kernels/gdn.py, its metadata in fixed device buffers, so a step has no host loop and no host sync
and can be captured in a CUDA graph (engine/cuda_graph.py); the runner uses it with the Triton
attention backend. Its commit replays all layers in one kernel launch. Prefill (EXTEND rows of
at least CHUNKED_MIN_ROWS for some request) goes through fla-core's chunked kernel where fla-core
is installed (the [gpu] extra): our kernel walks a request's rows one after another, which is
right for decode and verify but slow for long prompts (docs/benchmarks/hybrid.md).
"""

from __future__ import annotations

import functools
import logging

import torch
import torch.nn.functional as F

from specpilot.layers.gdn import causal_conv, delta_rule

log = logging.getLogger(__name__)
CHUNKED_MIN_ROWS = 64  # an EXTEND batch whose longest request has this many rows: fla chunked
FUSE_CONV_DECODE = True  # DECODE: conv and recurrence in one launch (False: two; benchmarks)


@functools.lru_cache(maxsize=None)
def fla_chunked():
    """fla-core's chunk_gated_delta_rule, or None (logged once) when fla-core is missing."""
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except ImportError as e:
        log.warning("fla-core not importable (%s): hybrid prefill runs the recurrent Triton kernel "
                    "row by row (slower for long prompts; pip install fla-core)", e)
        return None
    log.info("hybrid prefill: fla-core chunk_gated_delta_rule")
    return chunk_gated_delta_rule


class RecurrentStatePool:
    def __init__(self, num_layers: int, num_rows: int, conv_dim: int, conv_kernel: int,
                 heads: int, dk: int, dv: int, device: torch.device):
        self.num_layers, self.conv_dim, self.kernel = num_layers, conv_dim, conv_kernel
        self.heads, self.dk, self.dv = heads, dk, dv
        self.key_dim = (conv_dim - heads * dv) // 2  # conv channels: q, k (key_dim each), v
        self.conv = torch.zeros(num_layers, num_rows, conv_dim, conv_kernel - 1,
                                dtype=torch.float32, device=device)
        self.rec = torch.zeros(num_layers, num_rows, heads, dk, dv, dtype=torch.float32,
                               device=device)
        self.gate = None  # (A_log, dt_bias) fp32 [L, Hv] of the model: set_gates()

    def set_gates(self, a_log: torch.Tensor, dt_bias: torch.Tensor) -> None:
        """The recurrent layers' gate parameters, for kernels that form g and beta themselves."""
        self.gate = (a_log.float().contiguous(), dt_bias.float().contiguous())

    @property
    def bytes_per_row(self) -> int:
        return (self.conv[:, 0].numel() + self.rec[:, 0].numel()) * 4


class RecurrentBatch:
    def __init__(self, pool: RecurrentStatePool, rows: list[int], prefix_lens: list[int],
                 verify: bool):
        self.pool, self.rows, self.verify = pool, rows, verify
        self.fresh = [p == 0 for p in prefix_lens]
        self.stash: dict[tuple[int, int], tuple] = {}  # (layer, i) -> (x, k, v, g, beta)

    def initial(self, layer: int, i: int):
        """(conv window [C, K-1], state [H, Dk, Dv]) of request i before this forward."""
        if self.fresh[i]:
            return torch.zeros_like(self.pool.conv[layer, 0]), torch.zeros_like(
                self.pool.rec[layer, 0])
        r = self.rows[i]
        return self.pool.conv[layer, r], self.pool.rec[layer, r]

    def update(self, layer: int, i: int, window, state, x, k, v, g, beta) -> None:
        """After layer `layer` ran request i's rows: write back, or stash them under VERIFY."""
        if self.verify:
            self.stash[(layer, i)] = (x, k, v, g, beta)
            return
        r = self.rows[i]
        self.pool.conv[layer, r] = window
        self.pool.rec[layer, r] = state

    def commit(self, accepted: list[int]) -> None:
        """VERIFY only: state after rows 0..accepted[i] of each request becomes its state."""
        assert self.verify
        for (layer, i), (x, k, v, g, beta) in self.stash.items():
            n = accepted[i] + 1
            window, state = self.initial(layer, i)
            seq = torch.cat([window, x[:n].transpose(0, 1).float()], dim=1)
            r = self.rows[i]
            self.pool.conv[layer, r] = seq[:, seq.shape[1] - window.shape[1]:]
            q0 = torch.zeros_like(k[:n])
            self.pool.rec[layer, r] = delta_rule(q0, k[:n], v[:n], g[:n], beta[:n], state)[1]
        self.stash.clear()


class TensorRecurrentBatch:
    """RecurrentBatch's job for the Triton path and CUDA graphs (see the module docstring).

    Holds int32 [4, capacity] device metadata (state row, fresh flag, first flat row, number of
    rows per request) and, for VERIFY, a stash of every layer's per-row inputs: the conv inputs
    x [L, cap, C], the conv outputs k|v [L, cap, Hk Dk + Hv Dv] and the raw gate projections
    a, b [L, cap, Hv] (the kernel forms g and beta from them), all in the model dtype. With
    `capacity_rows` the stash is allocated once (a CUDA graph records its address); without,
    each verify step allocates one of its size.
    """

    tensorized = True

    def __init__(self, pool: RecurrentStatePool, dtype: torch.dtype, capacity_requests: int,
                 capacity_rows: int | None = None):
        self.pool, self.dtype = pool, dtype
        dev = pool.rec.device
        self.meta = torch.zeros(4, capacity_requests, dtype=torch.int32, device=dev)
        self.rows64 = torch.zeros(capacity_requests, dtype=torch.int64, device=dev)
        self.stash = self._stash(capacity_rows) if capacity_rows else None
        self.fixed = capacity_rows is not None
        self.n, self.uniform, self.verify, self.segments = 0, None, False, []
        self.key_heads = pool.key_dim // pool.dk
        # the fused decode kernel's per (request, key head) counts (kernels/gdn.py), kept zero
        self.counters = torch.zeros(capacity_requests * self.key_heads, dtype=torch.int32,
                                    device=dev)

    def _stash(self, rows: int) -> dict:
        p, dev = self.pool, self.pool.rec.device
        shape = (p.num_layers, rows)
        return dict(x=torch.zeros(*shape, p.conv_dim, dtype=self.dtype, device=dev),
                    kv=torch.zeros(*shape, p.conv_dim - p.key_dim, dtype=self.dtype, device=dev),
                    a=torch.zeros(*shape, p.heads, dtype=self.dtype, device=dev),
                    b=torch.zeros(*shape, p.heads, dtype=self.dtype, device=dev))

    def prepare(self, rows: list[int], prefix_lens: list[int], extend_lens: list[int],
                verify: bool) -> "TensorRecurrentBatch":
        n, total = len(rows), sum(extend_lens)
        starts = [0] * n
        for i in range(1, n):
            starts[i] = starts[i - 1] + extend_lens[i - 1]
        host = torch.tensor([rows, [int(p == 0) for p in prefix_lens], starts, extend_lens],
                            dtype=torch.int32)
        self.meta[:, :n].copy_(host.view(4, n), non_blocking=True)
        self.rows64[:n].copy_(self.meta[0, :n])
        self.n, self.verify, self.total = n, verify, total
        self.segments, self.host_rows = list(zip(starts, extend_lens)), list(rows)
        self.chunked = None
        if (not verify and not self.fixed and self.pool.rec.is_cuda
                and max(extend_lens, default=0) >= CHUNKED_MIN_ROWS):
            self.chunked = fla_chunked()
            cu = starts + [total]
            self.cu = (torch.tensor(cu, dtype=torch.long).to(self.pool.rec.device),
                       torch.tensor(cu, dtype=torch.long))
        self.uniform = extend_lens[0] if n and len(set(extend_lens)) == 1 else None
        if verify:
            if self.uniform is None:
                raise ValueError("a verify batch has the same number of rows for every request")
            if self.fixed:
                if total > self.stash["x"].shape[1]:
                    raise ValueError(f"{total} verify rows exceed the stash of "
                                     f"{self.stash['x'].shape[1]}")
            else:
                self.stash = self._stash(total)
        return self

    def mix(self, layer: int, x: torch.Tensor, weight: torch.Tensor, a: torch.Tensor,
            b: torch.Tensor, scale: float) -> torch.Tensor:
        """A Gated DeltaNet layer's token mixing: conv() of the conv inputs x [T, C], split into
        q | k | v, then delta() -> out [T, Hv, Dv] in x's dtype. DECODE (one row per request)
        runs both in one launch (kernels/gdn.conv_gated_delta_decode, the same numbers)."""
        p = self.pool
        if FUSE_CONV_DECODE and self.uniform == 1 and not self.verify and self.chunked is None:
            from specpilot.kernels.gdn import conv_gated_delta_decode, launch_config

            rows, fresh = self.meta[0, :self.n], self.meta[1, :self.n]
            return conv_gated_delta_decode(
                x, weight, p.conv[layer], a, b, p.rec[layer], rows, fresh, self.counters,
                key_heads=self.key_heads, gate=tuple(t[layer] for t in p.gate), scale=scale,
                **launch_config(1))
        y = self.conv(layer, x, weight)
        q, k, v = y.split([p.key_dim, p.key_dim, p.conv_dim - 2 * p.key_dim], dim=-1)
        return self.delta(layer, q, k, v, a, b, scale)

    def conv(self, layer: int, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """x [T, C] conv inputs -> silu(causal conv) [T, C]; writes each request's new window,
        or under VERIFY stashes x and the outputs' k | v instead (in the same launch). Uniform
        batches (decode, verify): one Triton launch (kernels/conv.py); ragged EXTEND batches:
        torch, per request."""
        from specpilot.kernels.conv import causal_conv as conv_kernel

        p = self.pool
        if self.uniform is not None:
            stash = None
            if self.verify:
                st = self.stash
                stash = (st["x"][layer, :self.total], st["kv"][layer, :self.total], p.key_dim)
            rows, fresh = self.meta[0, :self.n], self.meta[1, :self.n]
            return conv_kernel(x, weight, p.conv[layer], rows, fresh, self.uniform,
                               write_state=not self.verify, stash=stash)
        rows, fresh = self.rows64[:self.n], self.meta[1, :self.n]
        window = p.conv[layer].index_select(0, rows)  # [N, C, K-1]
        window = window * (fresh == 0).to(window.dtype)[:, None, None]
        y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        for i, (start, ext) in enumerate(self.segments):
            y[start:start + ext], new = causal_conv(window[i], x[start:start + ext], weight)
            p.conv[layer, self.host_rows[i]] = new
        return y

    def delta(self, layer: int, q, k, v, a, b, scale: float) -> torch.Tensor:
        """One layer's recurrence over the batch -> out [T, Hv, Dv] in q's dtype (kernels/gdn.py).
        a, b [T, Hv]: the raw gate projections (g and beta are formed in the kernel). Under
        VERIFY the kernel stashes a and b; k and v are this layer's conv outputs, which conv()
        has stashed already."""
        from specpilot.kernels.gdn import gated_delta_rule, launch_config

        if self.chunked is not None:
            return self._delta_chunked(layer, q, k, v, a, b, scale)
        rows, fresh, starts, lens = self.meta[:, :self.n]
        gate = tuple(x[layer] for x in self.pool.gate)
        most = self.uniform or max(e for _, e in self.segments)
        return gated_delta_rule(q, k, v, a, b, self.pool.rec[layer], rows, fresh, starts, lens,
                                key_heads=self.key_heads, scale=scale,
                                write_state=not self.verify, gate=gate, out_dtype=q.dtype,
                                stash_gates=((self.stash["a"][layer, :self.total],
                                              self.stash["b"][layer, :self.total])
                                             if self.verify else None),
                                **launch_config(most))

    def _delta_chunked(self, layer: int, q, k, v, a, b, scale: float) -> torch.Tensor:
        """EXTEND through fla-core's chunked kernel: states gathered from the pool (zeros for
        fresh requests), final states scattered back; g and beta formed in torch (as the
        reference layer does)."""
        a_log, dt_bias = (x[layer] for x in self.pool.gate)
        g = -a_log.exp() * F.softplus(a.float() + dt_bias)
        beta = b.sigmoid().float()
        p, t = self.pool, q.shape[0]
        rows, fresh = self.rows64[:self.n], self.meta[1, :self.n]
        init = p.rec[layer].index_select(0, rows) * (fresh == 0).float()[:, None, None, None]
        hk = self.key_heads
        o, final = self.chunked(
            q.reshape(1, t, hk, p.dk).contiguous(), k.reshape(1, t, hk, p.dk).contiguous(),
            v.reshape(1, t, p.heads, p.dv).contiguous(), g[None].contiguous(),
            beta[None].contiguous(), scale=scale, initial_state=init, output_final_state=True,
            use_qk_l2norm_in_kernel=True, cu_seqlens=self.cu[0], cu_seqlens_cpu=self.cu[1])
        p.rec[layer].index_copy_(0, rows, final.float())
        return o[0].to(q.dtype)

    def commit(self, accepted: list[int] | torch.Tensor) -> None:
        """VERIFY only: every layer's state and conv window move to after rows 0..accepted[i]
        (one kernel launch for all layers' delta-rule states, one for their conv windows).
        accepted: a list or a device tensor [R] (read on device: no host sync). A graph's
        batch may hold padding requests after the len(accepted) real ones."""
        from specpilot.kernels.conv import commit_windows
        from specpilot.kernels.gdn import gated_delta_rule, launch_config

        assert self.verify and len(accepted) <= self.n
        p, n, t = self.pool, len(accepted), self.uniform
        if isinstance(accepted, torch.Tensor):
            self.meta[3, :n].copy_(accepted + 1)
        else:
            keep = torch.tensor([a + 1 for a in accepted], dtype=torch.int32)
            self.meta[3, :n].copy_(keep, non_blocking=True)
        rows, fresh, starts, lens = self.meta[:, :n]
        st, kd, total = self.stash, p.key_dim, self.total
        kv = st["kv"][:, :total]
        gated_delta_rule(None, kv[..., :kd], kv[..., kd:], st["a"][:, :total],
                         st["b"][:, :total], p.rec, rows, fresh, starts, lens,
                         key_heads=self.key_heads, write_state=True, gate=p.gate,
                         **launch_config(t, p.num_layers))
        commit_windows(p.conv, st["x"], rows, fresh, lens, t)  # window after row a: a+1..
        self.verify = False
