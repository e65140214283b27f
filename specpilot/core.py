"""Shared vocabulary of the runtime: forward modes, sampling parameters, messages.

Data flow and ownership (one GPU, one process):

    server (asyncio, HTTP)      GenerateInput / AbortInput  ──queue──►  scheduler thread
    scheduler (CPU lists only)  builds a WorkerBatch (python ints)  ──►  engine.ModelRunner
    engine (owns all tensors)   ForwardBatch (device tensors)       ──►  models (nn.Module)
    scheduler                   RequestOutput per step  ──loop.call_soon_threadsafe──►  server

Nothing in this module imports torch: the scheduler and the server use it freely.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional


class ForwardMode(enum.Enum):
    EXTEND = "extend"  # prefill (possibly one chunk of it); rows = new tokens of each request
    DECODE = "decode"  # one new row per request
    # B rows per request at len..len+B-1, KV committed by length afterwards. The scheduler sends
    # it as a DECODE batch with decode_len = B; the stock worker runs the target pass with
    # run_target(..., verify=True) (recurrent state held until commit_verify).
    VERIFY = "verify"


class SamplingError(ValueError):
    """A sampling parameter is out of range; the server turns it into a 400."""


@dataclass
class SamplingParams:
    """SGLang's `sampling_params` names. temperature == 0 (below 1e-5, as vLLM: dividing by less
    overflows fp32) means greedy."""

    max_new_tokens: int = 128
    min_new_tokens: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1: off
    min_p: float = 0.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    no_stop_trim: bool = False
    seed: Optional[int] = None

    @classmethod
    def from_dict(cls, d: Optional[dict]) -> "SamplingParams":
        d = dict(d or {})
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(d) - known)
        if unknown:
            raise SamplingError(f"unknown sampling parameter(s): {', '.join(unknown)}")
        if isinstance(d.get("stop"), str):
            d["stop"] = [d["stop"]]
        for key in ("stop", "stop_token_ids"):
            if d.get(key) is None:
                d.pop(key, None)
        p = cls(**{k: v for k, v in d.items() if v is not None})
        p.validate()
        return p

    def validate(self) -> None:
        def check(ok: bool, msg: str) -> None:
            if not ok:
                raise SamplingError(msg)

        def is_num(x) -> bool:
            return isinstance(x, (int, float)) and not isinstance(x, bool)

        for name in ("temperature", "top_p", "min_p", "frequency_penalty", "presence_penalty",
                     "repetition_penalty"):
            check(is_num(getattr(self, name)), f"{name} must be a number")
        for name in ("max_new_tokens", "min_new_tokens", "top_k"):
            check(isinstance(getattr(self, name), int) and not isinstance(getattr(self, name), bool),
                  f"{name} must be an integer")
        check(self.temperature >= 0, f"temperature must be >= 0, got {self.temperature}")
        check(0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}")
        check(self.top_k == -1 or self.top_k >= 1, f"top_k must be -1 or >= 1, got {self.top_k}")
        check(0 <= self.min_p <= 1, f"min_p must be in [0, 1], got {self.min_p}")
        check(-2 <= self.frequency_penalty <= 2, "frequency_penalty must be in [-2, 2]")
        check(-2 <= self.presence_penalty <= 2, "presence_penalty must be in [-2, 2]")
        check(0 < self.repetition_penalty <= 2, "repetition_penalty must be in (0, 2]")
        check(self.max_new_tokens >= 0, f"max_new_tokens must be >= 0, got {self.max_new_tokens}")
        check(0 <= self.min_new_tokens <= self.max_new_tokens,
              "min_new_tokens must be in [0, max_new_tokens]")
        check(isinstance(self.stop, list) and all(isinstance(s, str) and s for s in self.stop),
              "stop must be a non-empty string or a list of non-empty strings")
        check(isinstance(self.stop_token_ids, list)
              and all(isinstance(t, int) and t >= 0 for t in self.stop_token_ids),
              "stop_token_ids must be a list of non-negative integers")
        check(self.seed is None or (isinstance(self.seed, int) and not isinstance(self.seed, bool)),
              "seed must be an integer")

    @property
    def greedy(self) -> bool:
        # below ~1e-5 logits / temperature overflows fp32 (NaN probs): treat as greedy (vLLM)
        return self.temperature < 1e-5 or self.top_k == 1

    @property
    def has_penalties(self) -> bool:
        return (self.frequency_penalty != 0 or self.presence_penalty != 0
                or self.repetition_penalty != 1)


@dataclass
class GenerateInput:
    """One tokenized request, server -> scheduler."""

    rid: str
    input_ids: list[int]
    sampling: SamplingParams
    stream: bool = False
    # token forcing (validation): emit exactly these tokens, and record for each position the
    # engine's own argmax and top-2 logit gap (RequestOutput.meta["forced_checks"])
    forced_ids: Optional[list[int]] = None


@dataclass
class AbortInput:
    rid: str


@dataclass
class RequestOutput:
    """Scheduler -> server, once per step in which the request made progress.

    `new_token_ids` / `text_delta` are what this step added (text may lag the tokens: bytes of an
    unfinished UTF-8 character and a suffix that could still become a stop string are held back).
    When `finished`, `output_ids` and `text` are the whole completion (stop string trimmed).
    """

    rid: str
    new_token_ids: list[int]
    text_delta: str
    finished: bool
    finish_reason: Optional[dict] = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    output_ids: Optional[list[int]] = None
    text: Optional[str] = None
    error: Optional[str] = None  # set when the request could not run at all
    meta: dict = field(default_factory=dict)


@dataclass
class WorkerBatch:
    """What the scheduler hands the engine for one forward: python ints only.

    Request i owns rows [sum(extend_lens[:i]), sum(extend_lens[:i+1])) of the flat lists; its new
    rows sit at positions prefix_lens[i] .. prefix_lens[i] + extend_lens[i] - 1 and are written to
    the KV slots out_cache_loc (same rows). The engine samples one next token per request from the
    last row of each request. A speculative DECODE (engine decode_len B > 1) gives each request
    extend_lens[i] = B rows and B slots, but input_ids holds only each request's anchor (its
    newest token): the speculative worker fills the other rows with its drafts.
    """

    mode: ForwardMode
    req_pool_indices: list[int]
    prefix_lens: list[int]
    extend_lens: list[int]
    input_ids: list[int]
    out_cache_loc: list[int]
    sampling: list[SamplingParams]
    steps: list[int]  # tokens already generated by each request (seeding, min_new_tokens)
    banned: list[list[int]]  # token ids request i may not sample while steps[i] < min_new_tokens
    histories: Optional[list[tuple[list[int], list[int]]]] = None  # (prompt, output) if penalties
    forced: Optional[list[list[int]]] = None  # token forcing: the next tokens each request emits

    @property
    def batch_size(self) -> int:
        return len(self.req_pool_indices)


@dataclass
class StepOutput:
    """What the engine returns for a WorkerBatch: the new tokens of each request, in order.

    ar: one token per request. Speculative DECODE: the accepted drafts plus the bonus token;
    `num_accepted[i]` (drafts accepted, bonus excluded) and `num_proposed` are set then.
    """

    tokens: list[list[int]]
    num_accepted: Optional[list[int]] = None
    num_proposed: int = 0
    # token forcing: per request, per emitted token, (engine argmax, top-2 logit gap)
    checks: Optional[list[list[tuple[int, float]]]] = None
