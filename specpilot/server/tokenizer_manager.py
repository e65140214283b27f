"""Requests -> GenerateInputs (tokenize, defaults, validation) and engine outputs -> responses.

Contracts:
  * Every user mistake raises `RequestError` (status 4xx, OpenAI-style type); nothing here may
    raise anything else for a bad request. Out-of-vocabulary `input_ids` are rejected here: the
    engine would index its embedding with them.
  * Context: a prompt must leave room for one token (`prompt_len < context_length`). An explicit
    `max_new_tokens`/`max_tokens` with `prompt_len + max > context_length` is a 400 (SGLang's
    message). The default is 128 for /generate and `context_length - prompt_len` for OpenAI,
    clamped to the context. As SGLang's scheduler does (`max_req_len`), a request is also
    clamped to the KV pool (`max_total_tokens - prompt_len`); a prompt that does not fit in the
    pool at all is a 400.
  * eos, stop strings and detokenization are the scheduler's: the text we return is the text the
    engine produced (`RequestOutput.text` at the end, `text_delta` on the way).
  * `RequestGroup` owns a set of submitted requests: it merges their outputs, and `close()` aborts
    whatever has not finished (client gone, error); close() is idempotent and must always run.
  * n > 1 (OpenAI): n engine requests per prompt, choice index = prompt_index * n + j, seed + j
    for choice j when a seed is given. Usage counts each prompt once, every completion token.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Optional

from specpilot.core import GenerateInput, RequestOutput, SamplingError, SamplingParams
from specpilot.server.protocol import ChatCompletionRequest, CompletionRequest, GenerateReqInput

MAX_N = 128


class RequestError(Exception):
    """A request the server refuses; becomes `{"error": {...}}` with `status`."""

    def __init__(self, message: str, status: int = 400, err_type: str = "invalid_request_error",
                 param: Optional[str] = None):
        super().__init__(message)
        self.message, self.status, self.err_type, self.param = message, status, err_type, param


class ClientGone(Exception):
    """The HTTP client disconnected while we waited; its requests were aborted."""


def new_rid() -> str:
    return uuid.uuid4().hex


def _reject_unsupported(req) -> None:
    bad = req.unsupported_features()
    if bad:
        raise RequestError(f"{bad[0]} is not supported", param=bad[0].split()[0])


def _sampling(d: dict) -> SamplingParams:
    try:
        return SamplingParams.from_dict(d)
    except (SamplingError, TypeError, ValueError) as e:
        raise RequestError(str(e), param="sampling_params") from None


class StreamState:
    """Accumulated output of one request. `update` returns the new text for this event.

    The engine's final `text` is authoritative (stop string trimmed); the last delta is whatever
    the deltas sent so far are missing from it, so concatenated deltas equal the final text.
    """

    def __init__(self, rid: str, prompt_len: int = 0):
        self.rid, self.prompt_len = rid, prompt_len
        self.text = ""
        self.output_ids: list[int] = []
        self.final: Optional[RequestOutput] = None
        self.error: Optional[str] = None

    def update(self, out: RequestOutput) -> str:
        self.output_ids.extend(out.new_token_ids)
        delta = out.text_delta or ""
        if out.error:
            self.error = out.error
        if not (out.finished or out.error):
            self.text += delta
            return delta
        self.final = out
        if out.output_ids is not None:
            self.output_ids = list(out.output_ids)
        if out.text is None:
            self.text += delta
        else:
            if out.text.startswith(self.text):
                delta = out.text[len(self.text):]
            self.text = out.text
        return delta

    @property
    def prompt_tokens(self) -> int:
        return (self.final.prompt_tokens if self.final else 0) or self.prompt_len

    @property
    def completion_tokens(self) -> int:
        return (self.final.completion_tokens if self.final else 0) or len(self.output_ids)

    @property
    def done(self) -> bool:
        return self.final is not None


class RequestGroup:
    """Submits inputs to the engine and yields `(index, output, text_delta)` as they arrive."""

    def __init__(self, client, inputs: list[GenerateInput]):
        self.client, self.inputs = client, inputs
        self.states = [StreamState(inp.rid, len(inp.input_ids)) for inp in inputs]
        self.t0 = time.perf_counter()
        self._merged: asyncio.Queue = asyncio.Queue()
        self._pumps: list[asyncio.Task] = []
        self._open: set[int] = set()

    def submit(self) -> None:
        for i, inp in enumerate(self.inputs):
            try:
                q = self.client.submit(inp)
            except ValueError as e:  # duplicate rid
                self.close()
                raise RequestError(str(e), param="rid") from None
            self._open.add(i)
            self._pumps.append(asyncio.create_task(self._pump(i, q)))

    async def _pump(self, i: int, q: asyncio.Queue) -> None:
        while True:
            out: RequestOutput = await q.get()
            self._merged.put_nowait((i, out))
            if out.finished or out.error:
                return

    async def next_event(self, timeout: Optional[float] = None):
        """The next `(index, output, delta)`, or None after `timeout` seconds.
        Callers loop `while group.open`; after the last request finished nothing more comes."""
        try:
            i, out = await asyncio.wait_for(self._merged.get(), timeout)
        except asyncio.TimeoutError:
            return None
        delta = self.states[i].update(out)
        if out.finished or out.error:
            self._open.discard(i)
        return i, out, delta

    @property
    def open(self) -> bool:
        return bool(self._open)

    async def collect(self, is_disconnected=None, poll_s: float = 0.5) -> list[StreamState]:
        """Wait for every request to finish; abort all and raise ClientGone if the client goes
        away (checked every `poll_s` seconds)."""
        next_check = time.monotonic() + poll_s
        while self._open:
            await self.next_event(poll_s)
            if is_disconnected is not None and time.monotonic() >= next_check:
                next_check = time.monotonic() + poll_s
                if await is_disconnected():
                    self.close()
                    raise ClientGone()
        return self.states

    def close(self) -> None:
        for t in self._pumps:
            t.cancel()
        for i in sorted(self._open):
            self.client.abort(self.inputs[i].rid)
        self._open.clear()

    def first_error(self) -> Optional[str]:
        return next((s.error for s in self.states if s.error), None)


def finish_fields(state: StreamState) -> tuple[Optional[str], Any]:
    """OpenAI `finish_reason` and SGLang `matched_stop` of a finished request."""
    fr = state.final.finish_reason if state.final else None
    if not fr:
        return None, None
    kind = fr.get("type")
    if kind == "stop":
        return "stop", fr.get("matched")
    return kind, None


class TokenizerManager:
    def __init__(self, client, args):
        self.client = client
        info = client.model_info
        self.tokenizer = client.tokenizer
        self.context_length: int = int(info["context_length"])
        self.vocab_size: Optional[int] = info.get("vocab_size")
        self.max_total_tokens: Optional[int] = info.get("max_total_tokens")
        self.served_model_name: str = (args.served_model_name or info.get("served_model_name")
                                       or info.get("model_path") or args.model_path or "default")
        self.model_path = info.get("model_path") or args.model_path

    # ------------------------------------------------------------------ checks
    def check_model(self, name: Optional[str]) -> None:
        if name is None or name in ("default", self.served_model_name, self.model_path):
            return
        raise RequestError(f"The model `{name}` does not exist.", status=404,
                           err_type="not_found_error", param="model")

    def _need_tokenizer(self, what: str):
        if self.tokenizer is None:
            raise RequestError(f"{what} needs a tokenizer, but the server runs with "
                               "--skip-tokenizer-init; send input_ids instead")
        return self.tokenizer

    def _check_ids(self, ids: list[int]) -> list[int]:
        if not ids:
            raise RequestError("The prompt is empty.", param="prompt")
        v = self.vocab_size
        if any(t < 0 or (v is not None and t >= v) for t in ids):
            raise RequestError(f"input_ids must be in [0, {v}).", param="input_ids")
        return ids

    def _fit(self, prompt_len: int, max_new: Optional[int], default: Optional[int] = None) -> int:
        """max_new_tokens for a prompt: `max_new` if given (400 if it overflows the context),
        else `default`, else the rest of the context; then clamped to the context and KV pool."""
        ctx = self.context_length
        if prompt_len >= ctx:
            raise RequestError(f"The input ({prompt_len} tokens) is longer than the model's "
                               f"context length ({ctx} tokens).", param="prompt")
        if max_new is not None and prompt_len + max_new > ctx:
            raise RequestError(
                f"Requested token count exceeds the model's maximum context length of {ctx} "
                f"tokens. You requested a total of {prompt_len + max_new} tokens: {prompt_len} "
                f"tokens from the input messages and {max_new} tokens for the completion. Please "
                "reduce the number of tokens in the input messages or the completion to fit "
                "within the limit.", param="max_tokens")
        n = next((x for x in (max_new, default) if x is not None), ctx - prompt_len)
        n = min(n, ctx - prompt_len)
        pool = self.max_total_tokens
        if pool:
            if prompt_len >= pool:
                raise RequestError(f"The input ({prompt_len} tokens) does not fit in the KV cache "
                                   f"({pool} tokens).", param="prompt")
            n = min(n, pool - prompt_len)
        return n

    def encode(self, text: str) -> list[int]:
        return list(self._need_tokenizer("A text prompt").encode(text))

    # ------------------------------------------------------------------ /generate
    def prepare_generate(self, req: GenerateReqInput) -> tuple[list[GenerateInput], bool]:
        """GenerateInputs of a native request and whether the request is a batch."""
        _reject_unsupported(req)
        if (req.text is None) == (req.input_ids is None):
            raise RequestError("Exactly one of `text` and `input_ids` must be given.")
        if req.text is not None:
            batch = isinstance(req.text, list)
            prompts = [self.encode(t) for t in (req.text if batch else [req.text])]
        else:
            batch = bool(req.input_ids) and isinstance(req.input_ids[0], list)
            prompts = list(req.input_ids) if batch else [req.input_ids]
        if batch and not prompts:
            raise RequestError("The batch is empty.", param="text")
        n = len(prompts)
        sps = req.sampling_params
        if isinstance(sps, list):
            if not batch or len(sps) != n:
                raise RequestError("sampling_params must be one dict or one per batch item.",
                                   param="sampling_params")
        else:
            sps = [sps] * n
        rids = req.rid
        if isinstance(rids, list):
            if not batch or len(rids) != n:
                raise RequestError("rid must be one string per batch item.", param="rid")
        elif rids is not None:
            rids = [rids] if not batch else [f"{rids}-{i}" for i in range(n)]
        inputs = []
        for i, ids in enumerate(prompts):
            d = dict(sps[i] or {})
            if d.pop("n", 1) not in (1, None):
                raise RequestError("sampling_params.n > 1 is not supported on /generate; "
                                   "send a batch instead", param="sampling_params")
            if "sampling_seed" in d:
                d["seed"] = d.pop("sampling_seed")
            sp = _sampling(d)
            self._check_ids(ids)
            explicit = sp.max_new_tokens if d.get("max_new_tokens") is not None else None
            sp.max_new_tokens = self._fit(len(ids), explicit, default=sp.max_new_tokens)
            sp.min_new_tokens = min(sp.min_new_tokens, sp.max_new_tokens)
            rid = rids[i] if rids else new_rid()
            inputs.append(GenerateInput(rid=rid, input_ids=list(ids), sampling=sp,
                                        stream=bool(req.stream)))
        return inputs, batch

    def generate_object(self, state: StreamState, t0: float) -> dict:
        fin = state.final
        meta = {
            "id": state.rid,
            "finish_reason": fin.finish_reason if fin else None,
            "prompt_tokens": state.prompt_tokens,
            "completion_tokens": state.completion_tokens,
            "cached_tokens": 0,
            "e2e_latency": time.perf_counter() - t0,
        }
        if fin is not None:
            meta.update(fin.meta or {})
        return {"text": state.text, "output_ids": list(state.output_ids), "meta_info": meta}

    # ------------------------------------------------------------------ OpenAI
    def _openai_inputs(self, req, prompts: list[list[int]], stream: bool) -> list[GenerateInput]:
        _reject_unsupported(req)
        self.check_model(req.model)
        n = 1 if req.n is None else req.n
        if not 1 <= n <= MAX_N:
            raise RequestError(f"n must be in [1, {MAX_N}], got {n}", param="n")
        max_tokens = req.requested_max_tokens()
        if max_tokens is not None and max_tokens < 1:
            raise RequestError(f"max_tokens must be at least 1, got {max_tokens}",
                               param="max_tokens")
        base = req.sampling_kwargs()
        inputs = []
        for ids in prompts:
            self._check_ids(ids)
            limit = self._fit(len(ids), max_tokens)
            for j in range(n):
                d = dict(base, max_new_tokens=limit)
                if req.seed is not None:
                    d["seed"] = req.seed + j
                sp = _sampling(d)
                sp.min_new_tokens = min(sp.min_new_tokens, sp.max_new_tokens)
                rid = req.rid if (req.rid and len(prompts) * n == 1) else new_rid()
                inputs.append(GenerateInput(rid=rid, input_ids=list(ids), sampling=sp,
                                            stream=stream))
        return inputs

    def prepare_completion(self, req: CompletionRequest) -> list[GenerateInput]:
        p = req.prompt
        if isinstance(p, str):
            prompts = [self.encode(p)]
        elif not p:
            raise RequestError("The prompt list is empty.", param="prompt")
        elif isinstance(p[0], str):
            prompts = [self.encode(t) for t in p]
        elif isinstance(p[0], int):
            prompts = [list(p)]
        else:
            prompts = [list(x) for x in p]
        return self._openai_inputs(req, prompts, bool(req.stream))

    def prepare_chat(self, req: ChatCompletionRequest) -> list[GenerateInput]:
        tok = self._need_tokenizer("Chat completion")
        if not req.messages:
            raise RequestError("messages must not be empty.", param="messages")
        try:
            msgs = [m.to_template_dict() for m in req.messages]
        except ValueError as e:
            raise RequestError(str(e), param="messages") from None
        kwargs = dict(req.chat_template_kwargs or {})
        cont = bool(req.continue_final_message)
        try:
            text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=not cont,
                                           continue_final_message=cont, **kwargs)
        except Exception as e:  # jinja errors: bad roles, template raise_exception(...)
            raise RequestError(f"Could not apply the chat template: {e}",
                               param="messages") from None
        ids = list(tok.encode(text, add_special_tokens=False))
        return self._openai_inputs(req, [ids], bool(req.stream))

    def usage(self, states: list[StreamState], n: int) -> dict:
        prompt = sum(s.prompt_tokens for s in states[::max(n, 1)])
        completion = sum(s.completion_tokens for s in states)
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion}

    def completion_object(self, rid: str, states: list[StreamState], n: int) -> dict:
        choices = []
        for i, s in enumerate(states):
            reason, matched = finish_fields(s)
            choices.append({"index": i, "text": s.text, "logprobs": None,
                            "finish_reason": reason, "matched_stop": matched})
        return {"id": rid, "object": "text_completion", "created": int(time.time()),
                "model": self.served_model_name, "choices": choices, "usage": self.usage(states, n)}

    def chat_object(self, rid: str, states: list[StreamState], n: int) -> dict:
        choices = []
        for i, s in enumerate(states):
            reason, matched = finish_fields(s)
            choices.append({"index": i,
                            "message": {"role": "assistant", "content": s.text,
                                        "reasoning_content": None, "tool_calls": None},
                            "logprobs": None, "finish_reason": reason, "matched_stop": matched})
        return {"id": rid, "object": "chat.completion", "created": int(time.time()),
                "model": self.served_model_name, "choices": choices, "usage": self.usage(states, n)}

    def chunk(self, rid: str, chat: bool, index: int, delta: Optional[str], state=None,
              role: bool = False) -> dict:
        """One streamed choice event; `state` given (finished) adds finish_reason/matched_stop."""
        reason, matched = finish_fields(state) if state is not None else (None, None)
        if chat:
            d: dict[str, Any] = {}
            if role:
                d["role"] = "assistant"
            if delta is not None:
                d["content"] = delta
            choice = {"index": index, "delta": d, "logprobs": None, "finish_reason": reason}
        else:
            choice = {"index": index, "text": delta or "", "logprobs": None,
                      "finish_reason": reason}
        if state is not None:
            choice["matched_stop"] = matched
        return {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()), "model": self.served_model_name, "choices": [choice]}

    def usage_chunk(self, rid: str, chat: bool, states: list[StreamState], n: int) -> dict:
        return {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()), "model": self.served_model_name, "choices": [],
                "usage": self.usage(states, n)}
