"""Incremental detokenization with stop strings, one instance per request (pure Python).

Contract
--------
`push(token_ids)` feeds newly generated ids and returns `(delta, stop)`:
  * `delta` is text that is safe to emit now: it never ends inside a multi-byte character
    (a decode that ends in U+FFFD because a character is split across tokens is held back until
    a later token completes it) and never contains a stop string nor a suffix that could still
    grow into one (that suffix is held back);
  * `stop` is the stop string that just appeared, else None. On a match the completion ends just
    before the stop string (or just after it when `no_stop_trim`); the text after it is dropped
    and later pushes are ignored (they return ("", None)).
`flush()` at finish returns everything still held back (a stop-string prefix that never
completed, bytes of an unfinished character as the tokenizer decodes them). Invariant:
`"".join(deltas) + flush() == text`, and without stop strings that equals
`tokenizer.decode(output_ids)` whenever the prompt's last tokens decode to whole characters.

Cost per push is O(new tokens + longest stop string): like vLLM/SGLang we decode only a window
`ids[prefix:]`, where `ids[prefix:read]` is the previously committed chunk (its text is known to
end on a character boundary) and `ids[read:]` the tokens not yet committed. The window starts
with a few prompt tokens so that tokenizers that strip a leading space at the start of a decode
(SentencePiece) decode the first completion token with its space.
"""

from __future__ import annotations

from typing import Optional, Sequence

_REPLACEMENT = "\ufffd"
_PROMPT_SEED = 6  # prompt tokens that start the decode window


class IncrementalDetokenizer:
    def __init__(self, tokenizer, prompt_ids: Sequence[int], skip_special_tokens: bool = True,
                 spaces_between_special_tokens: bool = True, stop: Sequence[str] = (),
                 no_stop_trim: bool = False):
        self._tokenizer = tokenizer
        self._decode_kwargs = dict(skip_special_tokens=skip_special_tokens,
                                   spaces_between_special_tokens=spaces_between_special_tokens,
                                   clean_up_tokenization_spaces=False)
        self._stops = [s for s in stop if s]
        self._no_stop_trim = no_stop_trim
        # Decode window: self._window == ids[prefix:], self._read == read - prefix.
        self._window: list[int] = list(prompt_ids[-_PROMPT_SEED:]) if prompt_ids else []
        self._read = len(self._window)
        self._prefix_text: Optional[str] = None  # decode(window[:read]), cached
        self._pending = ""  # clean (whole-character) text of window[read:], already visible
        self._buf = ""  # visible text not emitted yet: held-back stop-string prefix + new text
        self._emitted: list[str] = []  # every delta returned so far
        self._stop: Optional[str] = None
        self._done = False  # a stop matched or flush() ran

    # ---------------------------------------------------------------- public API
    @property
    def text(self) -> str:
        """Completion text so far: emitted + held back (after a match: ends at/after the stop)."""
        return "".join(self._emitted) + ("" if self._done else self._buf)

    @property
    def matched_stop(self) -> Optional[str]:
        return self._stop

    @property
    def finished(self) -> bool:
        return self._done

    def push(self, token_ids: Sequence[int]) -> tuple[str, Optional[str]]:
        if self._done or not token_ids:
            return "", None
        self._window.extend(token_ids)
        prefix_text = self._get_prefix_text()
        tail = self._decode(self._window)[len(prefix_text):]  # text of window[read:]
        if tail and not tail.endswith(_REPLACEMENT):
            # Whole characters up to the last token: commit and slide the window.
            appended = self._grow_pending(tail)
            self._window = self._window[self._read:]
            self._read = len(self._window)
            self._prefix_text = None
            self._pending = ""
        else:
            # Unfinished character at the end: its clean prefix is already safe to show.
            appended = self._grow_pending(tail.rstrip(_REPLACEMENT))
        return self._advance(appended, final=False)

    def flush(self) -> str:
        """At finish: everything still held back (an unfinished character decodes as U+FFFD)."""
        if self._done:
            return ""
        if len(self._window) > self._read:
            tail = self._decode(self._window)[len(self._get_prefix_text()):]
            appended = self._grow_pending(tail)
        else:
            appended = ""
        delta, _ = self._advance(appended, final=True)
        self._done = True
        return delta

    # ---------------------------------------------------------------- internals
    def _decode(self, ids: list[int]) -> str:
        try:
            return self._tokenizer.decode(ids, **self._decode_kwargs)
        except TypeError:  # a tokenizer without the transformers keywords
            self._decode_kwargs = {"skip_special_tokens": self._decode_kwargs["skip_special_tokens"]}
            return self._tokenizer.decode(ids, **self._decode_kwargs)

    def _get_prefix_text(self) -> str:
        if self._prefix_text is None:
            self._prefix_text = self._decode(self._window[:self._read]) if self._read else ""
        return self._prefix_text

    def _grow_pending(self, new_pending: str) -> str:
        """Visible text of window[read:] became `new_pending`; return the part not seen before.

        The previous pending text ends on a whole character, so a longer decode extends it."""
        old_len = len(self._pending)
        self._pending = new_pending
        return new_pending[old_len:]

    def _advance(self, appended: str, final: bool) -> tuple[str, Optional[str]]:
        """Append newly visible text, detect stops, and return the emittable delta."""
        old_len = len(self._buf)
        self._buf += appended
        if not self._buf:
            return "", None
        match = self._find_stop(old_len) if appended else None
        if match is not None:
            pos, stop = match
            end = pos + len(stop) if self._no_stop_trim else pos
            delta = self._buf[:end]
            self._buf = ""
            self._stop = stop
            self._done = True
            self._emitted.append(delta)
            return delta, stop
        hold = 0 if final else self._holdback()
        delta = self._buf[:len(self._buf) - hold]
        self._buf = self._buf[len(self._buf) - hold:]
        if delta:
            self._emitted.append(delta)
        return delta, None

    def _max_stop_len(self) -> int:
        return max((len(s) for s in self._stops), default=0)

    def _find_stop(self, old_len: int) -> Optional[tuple[int, str]]:
        """Earliest-completing new stop occurrence in buf (ties: the one starting first).

        A new occurrence ends past buf[:old_len] (already searched) and starts inside buf: any
        emitted-text suffix that could begin one was held back."""
        best = None
        for s in self._stops:
            pos = self._buf.find(s, max(0, old_len - len(s) + 1))
            if pos >= 0:
                key = (pos + len(s), pos)
                if best is None or key < best[0]:
                    best = (key, pos, s)
        return None if best is None else (best[1], best[2])

    def _holdback(self) -> int:
        """Length of the longest suffix of buf that is a proper prefix of some stop string."""
        buf = self._buf
        for k in range(min(len(buf), self._max_stop_len() - 1), 0, -1):
            suffix = buf[-k:]
            if any(s.startswith(suffix) for s in self._stops):
                return k
        return 0
