"""Training data made by the target itself: its continuations of the training prompts.

Every prompt gets its greedy continuation (what the drafter must predict at temperature 0); with
`--samples-per-prompt N` it also gets N-1 sampled ones (temperature / top-p), which multiplies
the distinct text the drafter sees from the same prompts: the held-out tau of a drafter trained
on greedy data only is limited by over-fitting to ~0.3 M tokens, not by the step count.

generate_completions(model, prompts, ...) runs transformers `generate` batched (left padding,
greedy or sampled, stop at EOS) and caches results in a JSON-lines file: line 1 is a header {"key": ...};
each later line {"i": prompt index, "completion": [ids]} is appended as soon as its batch is done,
so an interrupted run (or one stopped at its deadline) resumes where it stopped, and a second
run with the same key does not generate again. The key hashes the target's config.json, its
weight files' sizes, the prompt token ids, max_new_tokens, the dtype and the sampling settings.
A sampled batch is seeded from (seed, index of its first prompt), so a resumed generation draws
what an uninterrupted one would have (on the same device and library versions).

A completion is cut after its first EOS (the EOS kept: the drafter learns to propose it).

Mask token (`choose_mask_token`): the block's MASK rows must be a row of the target embedding
that the data never contains. Candidates in order, each skipped if the id occurs anywhere in the
generated data (prompts and completions) or its embedding row is all zeros:
  1. vocabulary rows no tokenizer token maps to (ids len(tokenizer)..vocab_size-1, lowest first;
     Qwen3's 151669 `<|MASK|>` is the first such row);
  2. the tokenizer's added special tokens other than bos/eos/pad/unk and not named in the chat
     template, highest id first (SmolLM2: `<empty_output>` = 16, then `<jupyter_script>` ...);
  3. any other id absent from the data, highest first.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Optional, Sequence

import torch
from tqdm.auto import tqdm


def cache_key(target_path: str, prompt_ids: Sequence[Sequence[int]], max_new_tokens: int,
              dtype: torch.dtype, sampling: Optional[dict] = None) -> str:
    h = hashlib.sha256()
    with open(os.path.join(target_path, "config.json"), "rb") as f:
        h.update(f.read())
    for fn in sorted(os.listdir(target_path)):
        if fn.endswith(".safetensors") or fn.endswith(".bin"):
            h.update(f"{fn}:{os.path.getsize(os.path.join(target_path, fn))}".encode())
    h.update(json.dumps([list(map(int, p)) for p in prompt_ids]).encode())
    h.update(f"{max_new_tokens}:{dtype}".encode())
    if sampling:
        h.update(json.dumps(sampling, sort_keys=True).encode())
    return h.hexdigest()[:16]


def _read_cache(path: str, key: str) -> dict[int, list[int]]:
    if not os.path.isfile(path):
        return {}
    done = {}
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or json.loads(lines[0]).get("key") != key:
        return {}
    for line in lines[1:]:
        try:
            rec = json.loads(line)
        except ValueError:  # a line cut by an interruption
            break
        done[int(rec["i"])] = [int(t) for t in rec["completion"]]
    return done


def cut_at_eos(ids: Sequence[int], eos: Sequence[int]) -> list[int]:
    out = []
    for t in ids:
        out.append(int(t))
        if t in eos:
            break
    return out


@torch.no_grad()
def generate_completions(model, prompts: list[list[int]], max_new_tokens: int, eos: Sequence[int],
                         pad_id: int, batch_size: int, cache_path: str, key: str,
                         deadline: Optional[float] = None,
                         sampling: Optional[dict] = None) -> list[Optional[list[int]]]:
    """Continuations of `prompts` (token ids), cached at cache_path (see module doc): greedy, or
    sampled with sampling = {"temperature", "top_p", "seed"}.

    Returns one completion per prompt, None for a prompt left ungenerated because `deadline`
    (time.monotonic()) passed. Prompts are batched longest first, left-padded with pad_id."""
    from transformers import GenerationConfig

    done = _read_cache(cache_path, key)
    if not done:
        os.makedirs(os.path.dirname(os.path.abspath(cache_path)), exist_ok=True)
        with open(cache_path, "w") as f:
            f.write(json.dumps({"key": key, "prompts": len(prompts),
                                "max_new_tokens": max_new_tokens}) + "\n")
    todo = sorted((i for i in range(len(prompts)) if i not in done), key=lambda i: -len(prompts[i]))
    device = next(model.parameters()).device
    sample_args = dict(do_sample=True, temperature=sampling["temperature"],
                       top_p=sampling["top_p"], top_k=0) if sampling else dict(do_sample=False)
    gc = GenerationConfig(max_new_tokens=max_new_tokens, eos_token_id=list(eos),
                          pad_token_id=pad_id, **sample_args)
    bar = tqdm(total=len(prompts), initial=len(done), unit="prompt",
               desc="generate data (sampled)" if sampling else "generate data (greedy)")
    with open(cache_path, "a") as f:
        for s in range(0, len(todo), batch_size):
            if deadline is not None and time.monotonic() > deadline:
                bar.write(f"data generation stopped at its time budget: {len(done)}/"
                          f"{len(prompts)} prompts done (the cache keeps them for the next run)")
                break
            idx = todo[s:s + batch_size]
            width = max(len(prompts[i]) for i in idx)
            ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for r, i in enumerate(idx):
                ids[r, width - len(prompts[i]):] = torch.tensor(prompts[i])
                mask[r, width - len(prompts[i]):] = 1
            if sampling:
                torch.manual_seed(int(sampling["seed"]) * 1_000_003 + idx[0])
            out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                 generation_config=gc)
            for r, i in enumerate(idx):
                done[i] = cut_at_eos(out[r, width:].tolist(), eos)
                f.write(json.dumps({"i": i, "completion": done[i]}) + "\n")
            f.flush()
            bar.update(len(idx))
    bar.close()
    return [done.get(i) for i in range(len(prompts))]


def choose_mask_token(tokenizer, vocab_size: int, used: set[int],
                      embed_weight: torch.Tensor) -> tuple[int, str]:
    """(mask id, how it was chosen); the rule is in the module docstring."""
    nonzero = embed_weight.detach().float().abs().sum(-1) > 0  # [V]

    def ok(i: int) -> bool:
        return 0 <= i < vocab_size and i not in used and bool(nonzero[i])

    if tokenizer is not None:
        n_tok = len(tokenizer)
        for i in range(n_tok, vocab_size):
            if ok(i):
                return i, ("first vocabulary row without a tokenizer token "
                           f"({n_tok}..{vocab_size - 1})")
        template = str(getattr(tokenizer, "chat_template", "") or "")
        core = {getattr(tokenizer, f"{k}_token_id", None) for k in ("bos", "eos", "pad", "unk")}
        added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
        special = sorted((i for i, t in added.items()
                          if getattr(t, "special", True) and i not in core
                          and getattr(t, "content", str(t)) not in template), reverse=True)
        for i in special:
            if ok(i):
                content = getattr(added[i], "content", str(added[i]))
                return i, (f"added special token {content!r}: not bos/eos/pad/unk, not in the chat "
                           "template, absent from the generated data")
    for i in range(vocab_size - 1, -1, -1):
        if ok(i):
            return i, "highest vocabulary id absent from the generated data"
    raise ValueError("every vocabulary id occurs in the data; give --mask-token-id")


def build_samples(prompt_ids: list[list[int]], completions: list[Optional[list[int]]],
                  meta: list[dict], max_len: int) -> tuple[list[dict], dict]:
    """Training sequences {"ids": prompt + completion (<= max_len), "prompt_len", "id", "source"}.

    A sequence needs >= 2 completion tokens inside max_len (one anchor + one label); others are
    dropped and counted in the returned stats."""
    samples, dropped = [], {"ungenerated": 0, "too_short_or_long": 0}
    for p, c, m in zip(prompt_ids, completions, meta):
        if c is None:
            dropped["ungenerated"] += 1
            continue
        ids = (list(p) + list(c))[:max_len]
        if len(ids) - len(p) < 2:
            dropped["too_short_or_long"] += 1
            continue
        samples.append({"ids": ids, "prompt_len": len(p), "id": m.get("id"),
                        "source": m.get("source")})
    stats = {"sequences": len(samples), "dropped": dropped,
             "completion_tokens": sum(len(s["ids"]) - s["prompt_len"] for s in samples),
             "total_tokens": sum(len(s["ids"]) for s in samples)}
    return samples, stats
