"""Request models of the HTTP API: SGLang's native /generate and the OpenAI routes.

Contracts:
  * Parsing is strict about the fields we know: a known field with a wrong JSON type (a string
    for `temperature`, a float for `max_tokens`, `1` for a bool) is a ValidationError, which the
    app turns into a 400. Unknown fields are accepted and ignored (`extra="allow"`), as SGLang and
    OpenAI clients send many optional knobs we do not implement.
  * Values are not range-checked here: ranges are `SamplingParams.validate`'s job (one place for
    /generate and OpenAI). Semantic checks that need the tokenizer or the context length live in
    `tokenizer_manager.py`.
  * Features we do not implement but that would change the output if silently ignored
    (`logprobs`, `echo`, constrained decoding, ...) are listed by `unsupported_features()` and
    rejected with 400 "... is not supported".
  * `sampling_kwargs()` maps an OpenAI request onto SGLang `sampling_params` names; `None`
    means "not given" (SamplingParams keeps its default).
"""

from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict

Prompt = Union[str, list[str], list[int], list[list[int]]]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


# ----------------------------------------------------------------------------- /generate


class GenerateReqInput(_Model):
    """SGLang `GenerateReqInput` subset. Exactly one of `text` / `input_ids`.

    A list `text` or a list-of-lists `input_ids` is a batch; `sampling_params` and `rid` may then
    be a list of the same length (or a single value applied to every item).
    """

    text: Optional[Union[str, list[str]]] = None
    input_ids: Optional[Union[list[int], list[list[int]]]] = None
    sampling_params: Optional[Union[dict[str, Any], list[dict[str, Any]]]] = None
    stream: Optional[bool] = False
    rid: Optional[Union[str, list[str]]] = None
    return_logprob: Optional[Union[bool, list[bool]]] = None
    return_hidden_states: Optional[bool] = None

    def unsupported_features(self) -> list[str]:
        bad = []
        if self.return_logprob is True or (
            isinstance(self.return_logprob, list) and any(self.return_logprob)
        ):
            bad.append("return_logprob")
        if self.return_hidden_states:
            bad.append("return_hidden_states")
        return bad


# ----------------------------------------------------------------------------- OpenAI


class StreamOptions(_Model):
    include_usage: Optional[bool] = False
    continuous_usage_stats: Optional[bool] = False


class _OpenAISampling(_Model):
    """Fields shared by /v1/completions and /v1/chat/completions (OpenAI + SGLang extras)."""

    model: Optional[str] = None
    max_tokens: Optional[int] = None
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    n: Optional[int] = 1
    stream: Optional[bool] = False
    stream_options: Optional[StreamOptions] = None
    stop: Optional[Union[str, list[str]]] = None
    seed: Optional[int] = None
    frequency_penalty: Optional[float] = None
    presence_penalty: Optional[float] = None
    user: Optional[str] = None
    rid: Optional[str] = None
    # SGLang extras
    top_k: Optional[int] = None
    min_p: Optional[float] = None
    repetition_penalty: Optional[float] = None
    min_tokens: Optional[int] = None
    ignore_eos: Optional[bool] = None
    stop_token_ids: Optional[list[int]] = None
    skip_special_tokens: Optional[bool] = None
    spaces_between_special_tokens: Optional[bool] = None
    no_stop_trim: Optional[bool] = None
    # present so that a truthy value can be rejected instead of silently ignored
    logprobs: Optional[Union[bool, int]] = None
    logit_bias: Optional[dict[str, Union[int, float]]] = None
    regex: Optional[str] = None
    json_schema: Optional[str] = None
    ebnf: Optional[str] = None

    def requested_max_tokens(self) -> Optional[int]:
        return self.max_tokens

    def unsupported_features(self) -> list[str]:
        bad = []
        # True (chat) or any count (completions: 0 asks for the chosen tokens' logprobs)
        if self.logprobs is not None and self.logprobs is not False:
            bad.append("logprobs")
        if self.logit_bias:
            bad.append("logit_bias")
        for name in ("regex", "json_schema", "ebnf"):
            if getattr(self, name):
                bad.append(name)
        return bad

    def sampling_kwargs(self) -> dict[str, Any]:
        """SGLang sampling_params (without max_new_tokens and seed: the manager sets those)."""
        d = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "frequency_penalty": self.frequency_penalty,
            "presence_penalty": self.presence_penalty,
            "repetition_penalty": self.repetition_penalty,
            "min_new_tokens": self.min_tokens,
            "stop": self.stop,
            "stop_token_ids": self.stop_token_ids,
            "ignore_eos": self.ignore_eos,
            "skip_special_tokens": self.skip_special_tokens,
            "spaces_between_special_tokens": self.spaces_between_special_tokens,
            "no_stop_trim": self.no_stop_trim,
        }
        return {k: v for k, v in d.items() if v is not None}

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class CompletionRequest(_OpenAISampling):
    prompt: Prompt
    echo: Optional[bool] = False
    suffix: Optional[str] = None
    best_of: Optional[int] = None

    def unsupported_features(self) -> list[str]:
        bad = super().unsupported_features()
        if self.echo:
            bad.append("echo")
        if self.suffix:
            bad.append("suffix")
        if self.best_of is not None and self.best_of != (self.n or 1):
            bad.append("best_of")
        return bad


class ContentPart(_Model):
    type: str
    text: Optional[str] = None


class ChatMessage(_Model):
    role: str
    content: Optional[Union[str, list[ContentPart]]] = None
    name: Optional[str] = None

    def to_template_dict(self) -> dict[str, Any]:
        """The message as the HF chat template expects it (content flattened to text).

        Raises ValueError for non-text content parts (images, audio): not supported.
        """
        if isinstance(self.content, list):
            texts = []
            for part in self.content:
                if part.type != "text" or part.text is None:
                    raise ValueError(f"content part of type {part.type!r} is not supported")
                texts.append(part.text)
            content = "".join(texts)
        else:
            content = self.content or ""
        d: dict[str, Any] = {"role": self.role, "content": content}
        if self.name is not None:
            d["name"] = self.name
        return d


class ResponseFormat(_Model):
    type: str


class ChatCompletionRequest(_OpenAISampling):
    messages: list[ChatMessage]
    max_completion_tokens: Optional[int] = None
    top_logprobs: Optional[int] = None
    response_format: Optional[ResponseFormat] = None
    tools: Optional[list[Any]] = None
    tool_choice: Optional[Union[str, dict[str, Any]]] = None
    chat_template_kwargs: Optional[dict[str, Any]] = None
    continue_final_message: Optional[bool] = False

    def requested_max_tokens(self) -> Optional[int]:
        # OpenAI deprecated max_tokens in favour of max_completion_tokens for chat
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens
        return self.max_tokens

    def unsupported_features(self) -> list[str]:
        bad = super().unsupported_features()
        if self.top_logprobs:
            bad.append("top_logprobs")
        if self.response_format is not None and self.response_format.type != "text":
            bad.append(f"response_format {self.response_format.type!r}")
        if self.tools and self.tool_choice != "none":
            bad.append("tools")
        return bad
