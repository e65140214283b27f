"""ModelRunner: owns the model, the KV cache, the request-to-token table and the sampler.

The scheduler calls `forward(WorkerBatch) -> list[int]` (one sampled token per request) and never
touches a tensor. Sizes decided here at start-up (KV slots, table rows) are returned in
`RunnerInfo`, not written back into any config.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

import torch

from specpilot.core import ForwardMode, StepOutput, WorkerBatch
from specpilot.engine.attention_backend import TorchNativeBackend
from specpilot.engine.kv_cache import KVCache, ReqToTokenTable
from specpilot.engine.sampler import SamplingBatch, _h2d, sample
from specpilot.engine.state_pool import RecurrentBatch, RecurrentStatePool, TensorRecurrentBatch
from specpilot.layers.linear import gemv_wanted, use_gemv
from specpilot.models.loader import build_model, load_hf_config

log = logging.getLogger(__name__)
_DTYPES = {"float32": torch.float32, "float": torch.float32, "bfloat16": torch.bfloat16,
           "float16": torch.float16, "half": torch.float16}
CPU_KV_BUDGET_BYTES = 2 << 30  # default KV pool on CPU when --max-total-tokens is not given
SPARE_POSITIONS = 64  # verify rows may run past the context end; they are never committed
# KV slots beyond num_kv_slots (the tokens a request may hold, max_total_tokens): a request as
# long as the pool allows still has room for its verify block (up to SPARE_POSITIONS rows)
SPARE_KV_SLOTS = SPARE_POSITIONS


@dataclass(frozen=True)
class RunnerInfo:
    device: str
    dtype: str
    context_length: int
    vocab_size: int
    num_kv_slots: int  # tokens a request may hold (max_total_tokens), scratch slot excluded
    num_req_rows: int
    eos_token_ids: tuple[int, ...]
    architecture: str
    decode_len: int = 1  # KV rows a DECODE step writes per request (the verify block when speculating)
    speculative_algorithm: Optional[str] = None
    kv_spare_slots: int = 0  # KV slots beyond num_kv_slots, for a verify block at the pool's end


def forced_checks(logits: torch.Tensor) -> list[tuple[int, float]]:
    """Token forcing: (argmax, top-1 minus top-2 logit) of each row of logits [N, V]."""
    top = logits.float().topk(2, dim=-1)
    gaps = (top.values[:, 0] - top.values[:, 1]).tolist()
    return list(zip(top.indices[:, 0].tolist(), gaps))


def resolve_device(device: str | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for but torch sees no CUDA device")
    return torch.device(device)


def resolve_attention_backend(name: str, device: torch.device) -> str:
    """auto: triton on CUDA when triton imports, else torch. triton on CPU needs the Triton
    interpreter (TRITON_INTERPRET=1, set before triton is first imported): for tests only."""
    import importlib.util
    import os

    have_triton = importlib.util.find_spec("triton") is not None
    if name == "auto":
        return "triton" if device.type == "cuda" and have_triton else "torch"
    if name == "triton":
        if not have_triton:
            raise RuntimeError("--attention-backend triton needs the triton package")
        if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError("--attention-backend triton on CPU runs only in the Triton "
                               "interpreter: set TRITON_INTERPRET=1 (tests), or use torch")
    return name


def to_w12(model: torch.nn.Module, what: str) -> dict:
    """--weight-format w12: every bf16 linear layer of `model` becomes a W12Linear (lossless
    12-bit weights, docs/w12.md), in place; embeddings, norms and tied heads stay bf16."""
    from specpilot.w12.linear import convert_model_linears

    dtypes = {p.dtype for p in model.parameters() if p.dim() >= 2}
    if torch.bfloat16 not in dtypes:
        raise ValueError(f"--weight-format w12 stores bf16 weights, but the {what}'s are "
                         f"{sorted(map(str, dtypes))}: pass --dtype bfloat16")
    report = convert_model_linears(model)
    log.info("W12 %s: %d linear layers converted, %d kept bf16", what, report["converted"],
             report["kept"])
    return report


def resolve_weight_format(name: str, model_path: str, load_format: str,
                          dtype: torch.dtype) -> str:
    """--weight-format auto is the checkpoint's: "w12" for a folder that
    ``python -m specpilot.w12 convert`` wrote (its tensors are decoded at load and the linear
    layers converted back), if the model runs in bf16; else "auto" (bf16 layers). A W12 folder
    in another dtype loads its decoded values into that dtype, with a warning: W12 layers hold
    bf16."""
    from specpilot.w12.convert import is_w12_checkpoint

    if name != "auto" or load_format == "dummy" or not is_w12_checkpoint(model_path):
        return name
    if dtype != torch.bfloat16:
        log.warning("%s is a W12 checkpoint, but the model runs in %s: its weights are decoded "
                    "into %s and the linear layers stay dense (W12 layers hold bf16; pass "
                    "--dtype bfloat16 to serve it as W12)", model_path,
                    str(dtype).replace("torch.", ""), str(dtype).replace("torch.", ""))
        return name
    log.info("%s is a W12 checkpoint: --weight-format auto serves it as w12", model_path)
    return "w12"


def resolve_dtype(name: str, hf_config, device: torch.device) -> torch.dtype:
    if name != "auto":
        return _DTYPES[name]
    if device.type == "cpu":
        return torch.float32
    ckpt = getattr(hf_config, "dtype", None) or getattr(hf_config, "torch_dtype", None)
    ckpt = ckpt if isinstance(ckpt, torch.dtype) else _DTYPES.get(str(ckpt), torch.bfloat16)
    return torch.bfloat16 if ckpt == torch.float32 else ckpt


def eos_ids(model_path: str, hf_config) -> tuple[int, ...]:
    from transformers import GenerationConfig

    ids = []
    try:
        ids.append(GenerationConfig.from_pretrained(model_path).eos_token_id)
    except OSError:
        pass
    ids.append(getattr(hf_config, "eos_token_id", None))
    flat = []
    for x in ids:
        for t in (x if isinstance(x, (list, tuple)) else [x]):
            if t is not None and t not in flat:
                flat.append(int(t))
    return tuple(flat)


class ModelRunner:
    def __init__(self, model_path: str, dtype: str = "auto", device: str | None = None,
                 context_length: int | None = None, mem_fraction_static: float = 0.85,
                 max_total_tokens: int | None = None, max_running_requests: int = 64,
                 random_seed: int = 0, load_format: str = "auto", attention_backend: str = "auto",
                 weight_format: str = "auto"):
        self.device = resolve_device(device)
        self.attention_backend = resolve_attention_backend(attention_backend, self.device)
        torch.manual_seed(random_seed)
        hf_config = load_hf_config(model_path)
        text_config = hf_config.get_text_config()  # the config itself for text-only models
        self.dtype = resolve_dtype(dtype, hf_config, self.device)
        max_pos = getattr(text_config, "max_position_embeddings", None)
        ctx = context_length or max_pos
        if ctx is None:
            raise ValueError("config.json has no max_position_embeddings: pass --context-length")
        if max_pos is not None and ctx > max_pos:
            log.warning("--context-length %d exceeds max_position_embeddings %d", ctx, max_pos)
        self.max_positions = ctx + SPARE_POSITIONS
        self.model, _ = build_model(model_path, self.dtype, self.device, self.max_positions,
                                    load_format, hf_config)
        self.weight_format = resolve_weight_format(weight_format, model_path, load_format,
                                                   self.dtype)
        if self.weight_format == "w12":
            self.w12_report = to_w12(self.model, "target")
        elif gemv_wanted(self.device, self.dtype):
            log.info("bf16 GEMV at one row: %d linear layers", use_gemv(self.model))
        self._pdl_setting()
        num_layers, kv_heads, head_dim = self.model.kv_cache_spec()
        per_token = KVCache.bytes_per_token(num_layers, kv_heads, head_dim, self.dtype)
        num_slots = max_total_tokens or (self._auto_kv_slots(per_token, mem_fraction_static)
                                         - SPARE_KV_SLOTS)
        num_slots = min(num_slots, ctx * max_running_requests)
        if num_slots < 2:
            raise RuntimeError("no memory left for the KV cache: raise --mem-fraction-static")
        self.kv = KVCache(num_layers, num_slots + 1 + SPARE_KV_SLOTS, kv_heads, head_dim,
                          self.dtype, self.device)
        num_rows = max_running_requests + 2  # + one partially prefilled request, + spare
        self.req_to_token = ReqToTokenTable(num_rows, self.max_positions, self.device)
        self.states = None  # recurrent state slots (hybrid targets), one per table row
        if hasattr(self.model, "recurrent_state_spec"):
            self.states = RecurrentStatePool(num_rows=num_rows, device=self.device,
                                             **self.model.recurrent_state_spec())
            self.states.set_gates(*self.model.recurrent_gate_params())
            log.info("recurrent state: %.1f MiB per request", self.states.bytes_per_row / 2**20)
        if self.attention_backend == "triton":
            from specpilot.engine.triton_backend import TritonBackend

            self.backend = TritonBackend(self.kv, self.req_to_token)
        else:
            self.backend = TorchNativeBackend(self.kv, self.req_to_token)
        self.graphs = None  # TargetGraphs of DECODE (1 row per request), see enable_cuda_graphs
        self._recurrent = None  # the tensorised recurrent batch of eager steps (Triton path)
        if self.states is not None and self.attention_backend == "triton":
            self._recurrent = TensorRecurrentBatch(self.states, self.dtype, num_rows)
        self.last_recurrent = None  # the recurrent batch of the last verify, for commit_verify
        self.info = RunnerInfo(
            device=str(self.device), dtype=str(self.dtype).replace("torch.", ""),
            context_length=ctx, vocab_size=self.model.config.vocab_size, num_kv_slots=num_slots,
            kv_spare_slots=SPARE_KV_SLOTS,
            num_req_rows=num_rows, eos_token_ids=eos_ids(model_path, self.model.config),
            architecture=type(self.model).__name__)
        log.info("KV cache: %d tokens + %d spare (%.2f GiB), context %d, %s on %s, %s attention",
                 num_slots, SPARE_KV_SLOTS, (num_slots + SPARE_KV_SLOTS) * per_token / 2**30, ctx,
                 self.info.dtype, self.device, self.attention_backend)

    def graph_support(self) -> str | None:
        """None if CUDA graphs can serve this runner, else why not."""
        if self.device.type != "cuda":
            return "not on CUDA"
        if self.attention_backend != "triton":
            return "the torch attention backend loops over requests on the host"
        return None

    def _pdl_setting(self) -> None:
        """Programmatic dependent launch of our Triton kernels (kernels/pdl.py): on for CUDA GPUs
        of compute capability >= 9 unless ``$SPECPILOT_PDL=0``; ``$SPECPILOT_PDL=1`` elsewhere is
        an error. Process-wide (read at each launch, so at graph capture)."""
        from specpilot.kernels import pdl

        asked = pdl.setting_from_env()
        ok = pdl.supported(self.device)
        if asked and not ok:
            raise ValueError("$SPECPILOT_PDL=1 needs a CUDA GPU of compute capability >= 9")
        pdl.ENABLED = ok if asked is None else asked
        if pdl.ENABLED:
            log.info("programmatic dependent launch of our Triton kernels ($SPECPILOT_PDL=0: off)")

    def enable_cuda_graphs(self, max_bs: int, capture: bool = True) -> None:
        """Capture DECODE graphs for batch buckets up to max_bs (the `ar` engine)."""
        from specpilot.engine.cuda_graph import TargetGraphs

        self.graphs = TargetGraphs(self, rows=1, max_bs=max_bs, capture=capture)

    def _auto_kv_slots(self, per_token: int, mem_fraction_static: float) -> int:
        if self.device.type == "cpu":
            return CPU_KV_BUDGET_BYTES // per_token
        free, total = torch.cuda.mem_get_info(self.device)
        used = total - free
        budget = int(total * mem_fraction_static) - used
        return max(budget // per_token, 0)

    def run_target(self, rows: list[int], prefix_lens: list[int], extend_lens: list[int],
                   input_ids: torch.Tensor, loc: torch.Tensor, capture: tuple[int, ...] = (),
                   verify: bool = False):
        """One target forward over ragged new rows; writes their KV. Returns (hidden, aux).

        Request i has extend_lens[i] new rows at positions prefix_lens[i].. in table row rows[i];
        input_ids and loc [T] are the flat rows. hidden [T, H]; aux [T, n*H] or None.
        verify: recurrent state is not advanced; call commit_verify(accepted) afterwards.
        """
        dev = self.device
        positions_l, rows_l = [], []
        for row, prefix, ext in zip(rows, prefix_lens, extend_lens):
            positions_l.extend(range(prefix, prefix + ext))
            rows_l.extend([row] * ext)
        positions = torch.tensor(positions_l, dtype=torch.int64, device=dev)
        self.req_to_token.write(torch.tensor(rows_l, dtype=torch.int64, device=dev), positions, loc)
        backend = self.backend.prepare(rows, prefix_lens, extend_lens, loc)
        if self._recurrent is not None:
            backend.recurrent = self._recurrent.prepare(rows, prefix_lens, extend_lens, verify)
        elif self.states is not None:
            backend.recurrent = RecurrentBatch(self.states, rows, prefix_lens, verify)
        if verify:
            self.last_recurrent = backend.recurrent
        return self.model(input_ids, positions, backend, capture)

    def commit_takes_device_counts(self) -> bool:
        """Whether commit_verify may be given the accepted counts as a device tensor (no
        recurrent state, or the tensorised batch); the torch reference loop needs a list."""
        return self.states is None or getattr(self.last_recurrent, "tensorized", False)

    def commit_verify(self, accepted: list[int] | torch.Tensor) -> None:
        """After a verify forward (eager or graphed): recurrent state = state after rows
        0..accepted[i] (KV rows beyond are rolled back by length by the scheduler). accepted: a
        list, or an int device tensor [R] where commit_takes_device_counts()."""
        if self.states is not None:
            self.last_recurrent.commit(accepted)
            self.last_recurrent = None

    def sampling_batch(self, wb: WorkerBatch) -> SamplingBatch:
        return SamplingBatch.from_params(wb.sampling, wb.steps, wb.histories, self.info.vocab_size,
                                         self.device, banned_until_min=wb.banned)

    def tensor(self, xs: list[int]) -> torch.Tensor:
        return torch.tensor(xs, dtype=torch.int64, device=self.device)

    @torch.inference_mode()
    def forward(self, wb: WorkerBatch) -> StepOutput:
        """EXTEND or DECODE: one sampled token per request, from its last row."""
        if wb.mode == ForwardMode.DECODE:
            return self._sample(wb, self._decode_logits(wb, list(wb.input_ids)))
        hidden, _ = self.run_target(wb.req_pool_indices, wb.prefix_lens, wb.extend_lens,
                                    self.tensor(wb.input_ids), self.tensor(wb.out_cache_loc))
        last = self.tensor(wb.extend_lens).cumsum(0) - 1
        return self._sample(wb, self.model.compute_logits(hidden[last]))  # [B, V] fp32

    @torch.inference_mode()
    def launch_decode(self, wb: WorkerBatch, input_ids: torch.Tensor | None = None) -> "PendingTokens":
        """DECODE for the overlap scheduler: queues the step and its sampling on the device and
        returns without waiting for the tokens. input_ids: [R] int64 device tensor (the previous
        step's tokens, not yet on the host) or None (wb.input_ids). No token forcing here."""
        if wb.forced is not None:
            raise ValueError("launch_decode does not force tokens; use forward")
        ids = input_ids if input_ids is not None else list(wb.input_ids)
        return PendingTokens(sample(self._decode_logits(wb, ids), self.sampling_batch(wb)))

    def _decode_logits(self, wb: WorkerBatch, ids: torch.Tensor | list[int]) -> torch.Tensor:
        """Logits [R, V] fp32 of a DECODE step (one row per request): the graph of its bucket
        when there is one (host lists travel in one copy), else the eager target."""
        if self.graphs is not None and self.graphs.bucket(wb.batch_size) is not None:
            return self.graphs.run(wb.req_pool_indices, wb.prefix_lens, ids,
                                   list(wb.out_cache_loc))[0]
        ids = ids if isinstance(ids, torch.Tensor) else self.tensor(ids)
        hidden, _ = self.run_target(wb.req_pool_indices, wb.prefix_lens, wb.extend_lens, ids,
                                    self.tensor(wb.out_cache_loc))
        return self.model.compute_logits(hidden)  # one new row per request

    def _sample(self, wb: WorkerBatch, logits: torch.Tensor) -> StepOutput:
        if wb.forced is not None:
            return StepOutput(wb.forced, checks=[[c] for c in forced_checks(logits)])
        tokens = sample(logits, self.sampling_batch(wb)).tolist()  # the step's one D2H copy
        return StepOutput([[t] for t in tokens])


def copy_to_host_async(x: torch.Tensor):
    """(host copy, event or None): a CUDA tensor goes into pinned memory by a non-blocking copy
    (wait on the event before reading it); a CPU tensor is cloned (the caller may reuse x)."""
    if not x.is_cuda:
        return x.clone(), None
    host = torch.empty(x.shape, dtype=x.dtype, pin_memory=True)
    host.copy_(x, non_blocking=True)
    event = torch.cuda.Event()
    event.record()
    return host, event


class PendingTokens:
    """One sampled token per request on its way to the host: `tokens` stays on the device (the
    overlap scheduler feeds it to the next step as input ids) while a non-blocking copy moves it
    into pinned host memory; result() waits for that copy only."""

    def __init__(self, tokens: torch.Tensor):
        self.tokens = tokens
        self._host, self._event = copy_to_host_async(tokens)

    def device_tokens(self, pick: list[int] | None = None) -> torch.Tensor:
        """The tokens on the device, [R] int64, or those of the requests at `pick` (in order)."""
        if pick is None:
            return self.tokens
        return self.tokens[_h2d(pick, torch.int64, self.tokens.device)]  # no stream sync

    def result(self) -> StepOutput:
        if self._event is not None:
            self._event.synchronize()
        return StepOutput([[t] for t in self._host.tolist()])
