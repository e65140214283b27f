"""Training data made by the target itself: its continuations of the training prompts.

Every prompt gets its greedy continuation (what the drafter must predict at temperature 0); with
`--samples-per-prompt N` it also gets N-1 sampled ones (temperature / top-p), which multiplies
the distinct text the drafter sees from the same prompts: the held-out tau of a drafter trained
on greedy data only is limited by over-fitting to ~0.3 M tokens, not by the step count.

generate_completions(model, jobs, ...) runs transformers `generate` batched (left padding, greedy
or sampled, stop at EOS). A job is (prompt ids, k): k = 0 for the greedy continuation; sampled
continuations (their own settings key) number the draws of one prompt k = 0, 1, ... Results are
cached per job, content-addressed, in JSON-lines files under the work dir: line 1 is a header
{"format": 2, "settings": key, ...}; each later line {"h": prompt_hash(prompt ids), "k": k,
"completion": [ids]} is appended as soon as its batch is done. The settings key (settings_key)
hashes the target's config (less transformers_version), its weight files' sizes,
max_new_tokens, the dtype and the sampling settings; every `data-<key>*.jsonl` file of the work
dir with that key is read (read_caches), so
  - a larger prompt set reuses every continuation already generated for its prompts,
  - an interrupted run (or one stopped at its deadline) resumes where it stopped,
  - generation can be split over processes / GPUs (`--gen-shard i/n` writes
    data-<key>-<i>of<n>.jsonl) and the shards are read back together.
Two generators: HFGenerator (transformers `generate`) and EngineGenerator (our own engine, the
`ar` engine's kernels; --gen-backend). A sampled job's seed is job_seed(seed, hash, k); the
engine seeds each request with it (a draw independent of batching), transformers seeds a batch
with its first job's (a draw reproducible when the batches are the same).

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
import sys
import time
from typing import Optional, Sequence

import torch
from tqdm.auto import tqdm


def settings_key(target_path: str, max_new_tokens: int, dtype: torch.dtype,
                 sampling: Optional[dict] = None) -> str:
    h = hashlib.sha256()
    with open(os.path.join(target_path, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("transformers_version", None)  # the library that wrote it does not change the model
    h.update(json.dumps(cfg, sort_keys=True).encode())
    for fn in sorted(os.listdir(target_path)):
        if fn.endswith(".safetensors") or fn.endswith(".bin"):
            h.update(f"{fn}:{os.path.getsize(os.path.join(target_path, fn))}".encode())
    h.update(f"{max_new_tokens}:{dtype}".encode())
    if sampling:
        h.update(json.dumps(sampling, sort_keys=True).encode())
    return h.hexdigest()[:16]


def prompt_hash(ids: Sequence[int]) -> str:
    return hashlib.sha256(json.dumps([int(t) for t in ids]).encode()).hexdigest()[:16]


def cache_files(work_dir: str, key: str) -> list[str]:
    if not os.path.isdir(work_dir):
        return []
    return sorted(os.path.join(work_dir, fn) for fn in os.listdir(work_dir)
                  if fn.startswith(f"data-{key}") and fn.endswith(".jsonl"))


def read_caches(work_dir: str, key: str) -> dict[tuple[str, int], list[int]]:
    """{(prompt hash, k): completion} from every cache file of `key` in work_dir (see module doc).
    A file whose header is not format 2 with this key is skipped with a warning; a line cut by an
    interruption is skipped."""
    done: dict[tuple[str, int], list[int]] = {}
    for path in cache_files(work_dir, key):
        with open(path) as f:
            lines = f.read().splitlines()
        try:
            head = json.loads(lines[0]) if lines else None
        except ValueError:
            head = None
        if head is None:  # empty, or its header is still being written by another process
            continue
        if head.get("format") != 2 or head.get("settings") != key:
            print(f"warning: {path} is not a format-2 cache of settings {key}; ignored",
                  file=sys.stderr)
            continue
        for line in lines[1:]:
            try:
                rec = json.loads(line)
            except ValueError:  # a line cut by an interruption: the records after it still count
                continue
            done[(rec["h"], int(rec["k"]))] = [int(t) for t in rec["completion"]]
    return done


def cut_at_eos(ids: Sequence[int], eos: Sequence[int]) -> list[int]:
    out = []
    for t in ids:
        out.append(int(t))
        if t in eos:
            break
    return out


def job_seed(seed: int, h: str, k: int) -> int:
    """The sampling seed of job (prompt hash h, draw k): independent of batching and order."""
    return (int(seed) * 1_000_003 + int(h, 16) * 31 + int(k)) % (2**63 - 1)


class HFGenerator:
    """Batches through transformers `generate` (left padding, stop at EOS). Sampled batches are
    seeded with their first job's seed, so a draw depends on the batch it was made in."""

    name = "hf"

    def __init__(self, model, max_new_tokens: int, eos: Sequence[int], pad_id: int):
        self.model, self.eos, self.pad_id, self.max_new = model, list(eos), pad_id, max_new_tokens

    @torch.no_grad()
    def __call__(self, prompts: list[list[int]], sampling: Optional[dict],
                 seeds: list[int]) -> list[list[int]]:
        from transformers import GenerationConfig

        args = dict(do_sample=True, temperature=sampling["temperature"], top_p=sampling["top_p"],
                    top_k=0) if sampling else dict(do_sample=False)
        gc = GenerationConfig(max_new_tokens=self.max_new, eos_token_id=self.eos,
                              pad_token_id=self.pad_id, **args)
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            ids[r, width - len(p):] = torch.tensor(p)
            mask[r, width - len(p):] = 1
        if sampling:
            torch.manual_seed(seeds[0])
        device = next(self.model.parameters()).device
        out = self.model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                  generation_config=gc)
        return [cut_at_eos(out[r, width:].tolist(), self.eos) for r in range(len(prompts))]


class EngineGenerator:
    """Batches through our own engine (OfflineEngine: paged KV cache, continuous batching, CUDA
    graphs on the GPU): the kernels the `ar` engine decodes with. A sampled job uses its own seed
    (job_seed), so its draw does not depend on the batch. The engine stops at the target's EOS
    ids and keeps the EOS token, like cut_at_eos. The engine is built on the first call, so a run
    whose data is all cached builds none.

    The engine keeps `batch_size` requests running and admits the next waiting one as one
    finishes, so generate_completions hands it JOBS_PER_CALL batches' worth of jobs per call: a
    call of one batch would drain to its longest answer before the next batch could start.
    With min_admit N > 1 a finished request's slot waits until N slots are free, and those N
    requests are prefilled together (OfflineEngine.generate), not one prefill per finish."""

    name = "engine"
    JOBS_PER_CALL = 4  # batches of jobs per call (the deadline is checked between calls)

    def __init__(self, target_path: str, device: str, dtype: str, batch_size: int, max_len: int,
                 max_new_tokens: int, min_admit: int = 1):
        from specpilot.config import ServerArgs

        self.max_new, self.engine, self.min_admit = max_new_tokens, None, min_admit
        self.jobs_per_call = self.JOBS_PER_CALL * batch_size
        per_seq = max_len + max_new_tokens + 16
        self.args = ServerArgs(
            model_path=target_path, device=device, dtype=dtype, skip_tokenizer_init=True,
            max_running_requests=batch_size, max_total_tokens=batch_size * per_seq,
            context_length=per_seq, cuda_graph_max_bs=min(batch_size, 256))

    def __call__(self, prompts: list[list[int]], sampling: Optional[dict],
                 seeds: list[int]) -> list[list[int]]:
        from specpilot.core import SamplingParams
        from specpilot.offline import OfflineEngine

        if self.engine is None:
            self.engine = OfflineEngine(self.args)
        if sampling:
            params = [SamplingParams(max_new_tokens=self.max_new, seed=s,
                                     temperature=sampling["temperature"], top_p=sampling["top_p"])
                      for s in seeds]
        else:
            params = SamplingParams(max_new_tokens=self.max_new, temperature=0)
        return [list(o.output_ids) for o in self.engine.generate(prompts, params,
                                                                 min_admit=self.min_admit)]


def generate_completions(gen, jobs: list[tuple[list[int], int]], batch_size: int, work_dir: str,
                         key: str, max_new_tokens: int, deadline: Optional[float] = None,
                         sampling: Optional[dict] = None,
                         shard: tuple[int, int] = (0, 1)) -> list[Optional[list[int]]]:
    """Continuations of `jobs` [(prompt ids, k)] made by `gen` (HFGenerator, EngineGenerator or
    None), cached under work_dir (see module doc): greedy, or sampled with sampling =
    {"temperature", "top_p", "seed"}.

    Returns one completion per job, None for a job left ungenerated: past `deadline`
    (time.monotonic()), outside this process's `shard` (i, n) (jobs j with j % n == i are
    generated here; the others only read from the caches), or every uncached one when `gen` is
    None (train on the caches only). Jobs are batched longest first; `gen` gets batch_size jobs
    per call, or gen.jobs_per_call where it has one (a continuously batching engine)."""
    done = read_caches(work_dir, key)
    memo: dict[int, str] = {}  # the k draws of one prompt share its ids list: hash it once
    for p, _ in jobs:
        if id(p) not in memo:
            memo[id(p)] = prompt_hash(p)
    hashes = [(memo[id(p)], int(k)) for p, k in jobs]
    idx, n_shards = shard
    todo = sorted({hk: j for j, hk in enumerate(hashes)
                   if hk not in done and j % n_shards == idx}.values(),
                  key=lambda j: -len(jobs[j][0]))
    what = "sampled" if sampling else "greedy"
    if todo and gen is None:
        print(f"data ({what}): {len(hashes) - len(todo)}/{len(jobs)} cached; the other "
              f"{len(todo)} are left out (no generation asked for)", file=sys.stderr)
    elif todo:
        tag = "" if n_shards == 1 else f"-{idx}of{n_shards}"
        path = os.path.join(work_dir, f"data-{key}{tag}.jsonl")
        print(f"generate data ({what}, {gen.name}): {len(todo)} to generate, "
              f"{sum(hk in done for hk in hashes)}/{len(jobs)} cached", file=sys.stderr)
        bar = tqdm(total=len(todo), unit="seq", desc=f"generate data ({what})")
        f = None
        per_call = getattr(gen, "jobs_per_call", batch_size)
        try:
            for s in range(0, len(todo), per_call):
                if deadline is not None and time.monotonic() > deadline:
                    bar.write(f"data generation stopped at its time budget: {s}/{len(todo)} "
                              "generated (the cache keeps them for the next run)")
                    break
                if f is None:  # the file is made only once something is generated
                    os.makedirs(work_dir, exist_ok=True)
                    new = not os.path.isfile(path) or os.path.getsize(path) == 0
                    if not new:
                        with open(path, "rb") as r:
                            r.seek(-1, os.SEEK_END)
                            cut = r.read(1) != b"\n"
                    f = open(path, "a")
                    if not new and cut:  # an interrupted run left a partial line: end it
                        f.write("\n")
                    if new:
                        f.write(json.dumps({"format": 2, "settings": key, "sampling": sampling,
                                            "max_new_tokens": max_new_tokens}) + "\n")
                batch = todo[s:s + per_call]
                seeds = [job_seed(sampling["seed"], *hashes[j]) if sampling else 0 for j in batch]
                outs = gen([jobs[j][0] for j in batch], sampling, seeds)
                for j, c in zip(batch, outs):
                    done[hashes[j]] = c
                    f.write(json.dumps({"h": hashes[j][0], "k": hashes[j][1],
                                        "completion": c}) + "\n")
                f.flush()
                bar.update(len(batch))
        finally:
            if f is not None:
                f.close()
            bar.close()
    return [done.get(hk) for hk in hashes]


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


def repeat_sources(samples: list[dict], repeats: dict[str, int]) -> list[dict]:
    """samples with each sequence of source s listed repeats[s] times (the same dicts; the
    sampler's permutation then shows it that often per epoch). Unknown sources are an error."""
    have = {s["source"] for s in samples}
    unknown = sorted(set(repeats) - have)
    if unknown:
        raise ValueError(f"--repeat names sources the data does not have: {unknown}; it has "
                         f"{sorted(have)}")
    return [s for s in samples for _ in range(repeats.get(s["source"], 1))]
