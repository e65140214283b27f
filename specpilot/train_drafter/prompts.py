"""Prompt sources for drafter training and for held-out acceptance measurement.

THE SPLIT (recorded in every checkpoint's train_meta.json):
  gsm8k_test.jsonl   rows [0, n//2)      -> training      (n = 1319: rows 0-658, 659 prompts)
                     rows [n//2, n)      -> held out       ("gsm8k-heldout": rows 659-1318)
  mbpp.jsonl         task_id 1-10, 511-974 -> training (few-shot, validation and train splits)
                     task_id 11-510        -> held out ("mbpp-test", the standard MBPP test split)
  humaneval.jsonl, math500_test.jsonl      -> never used for training (held out entirely)
  gsm8k variants     (optional, --gsm8k-variants N) copies of the *training* rows' questions with
                     their numbers and first names replaced at random (gsm8k_variants below):
                     new problems in gsm8k's own style, drawn from the training half only.
  prompts files      (optional, --prompts-file) JSON-lines prompts, e.g. problems written by the
                     target itself (self_instruct.py); any that starts like a benchmark item is
                     dropped.
  synthetic          templated prompts written in specpilot/train_drafter/synthetic.py (optional,
                     --synthetic N): word problems, plain algebra, competition-style LaTeX math
                     (math500-like format), mbpp-style code tasks, humaneval-style signature +
                     docstring completions, explanations. Only the *format* of math500/humaneval
                     is imitated; no text of any held-out item is used.

Prompt texts are formatted exactly as the scorer formats them (specpilot.evals.datasets), so the
drafter is trained on the same user-turn shape it is measured on. Files are read from a data
directory given explicitly (no search path); each file's sha256 is recorded and compared with
the published one (a mismatch is allowed: tests use small stand-in files).

Items are dicts {"id", "source", "prompt"} (prompt: the user message text).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from pathlib import Path
from typing import Optional

from specpilot.evals.datasets import FILES, SHA256, _item

MBPP_TEST = range(11, 511)
TRAIN_SOURCES = ("gsm8k", "mbpp")
EVAL_SPLITS = ("gsm8k-heldout", "math500", "humaneval", "mbpp-test")
SPLIT_DESCRIPTION = {
    "gsm8k": "gsm8k_test.jsonl: first half of the rows (row < n//2) train; second half held out",
    "mbpp": "mbpp.jsonl: task_id 1-10 and 511-974 train; 11-510 (test split) held out",
    "humaneval": "never used for training",
    "math500": "never used for training",
}


def read_rows(data_dir: str, name: str) -> tuple[list[dict], dict]:
    """Rows of FILES[name] in data_dir, and {"file", "rows", "sha256", "published_sha256_match"}.

    Raises FileNotFoundError naming the folder when the file is absent."""
    path = Path(data_dir) / FILES[name]
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (--data-dir must hold {FILES[name]})")
    raw = path.read_bytes()
    rows = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    sha = hashlib.sha256(raw).hexdigest()
    return rows, {"file": FILES[name], "rows": len(rows), "sha256": sha,
                  "published_sha256_match": sha == SHA256.get(FILES[name])}


def _gsm8k_rows(data_dir: str, heldout: bool) -> tuple[range, list[dict], dict]:
    """(row indices of the half, all rows, file info with "used_rows")."""
    rows, info = read_rows(data_dir, "gsm8k")
    half = len(rows) // 2
    idx = range(half, len(rows)) if heldout else range(half)
    info["used_rows"] = f"{idx.start}-{idx.stop - 1}" if len(idx) else "none"
    return idx, rows, info


def _gsm8k(data_dir: str, heldout: bool) -> tuple[list[dict], dict]:
    idx, rows, info = _gsm8k_rows(data_dir, heldout)
    return [{"source": "gsm8k", **_item("gsm8k", i, rows[i])} for i in idx], info


def _mbpp(data_dir: str, test: bool) -> tuple[list[dict], dict]:
    rows, info = read_rows(data_dir, "mbpp")
    keep = [r for r in rows if (r["task_id"] in MBPP_TEST) == test]
    info["used_task_ids"] = "11-510" if test else "1-10,511-974"
    return [{"source": "mbpp", **_item("mbpp", 0, r)} for r in keep], info


FIRST_NAMES = (
    "Aaron Abby Adam Aisha Alan Albert Alex Alice Amy Andrew Angela Ann Anna Ashley Ben Beth Bill "
    "Bob Brian Carl Carla Carlos Carol Charles Charlie Chris Claire Dan Daniel David Diana Emily "
    "Emma Eric Eva Frank Gary George Grace Greg Hannah Harry Helen Henry Jack Jake James Jamie "
    "Jane Janet Jason Jean Jenny Jerry Jessica Jim Joe John Jon Josh Julia Julie Karen Kate Kelly "
    "Ken Kevin Kim Laura Leo Lily Linda Lisa Liz Lucy Luke Maria Mark Mary Matt Max Mia Michael "
    "Mike Nancy Nick Nina Noah Olivia Paul Peter Rachel Ray Rebecca Richard Rob Robert Rose Ryan "
    "Sam Sara Sarah Scott Sean Sophia Steve Susan Tim Tina Tom Tony Victor Wendy Will Zoe").split()
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(%?)")


def _new_number(text: str, rng: random.Random) -> str:
    """A random number of the same shape as `text` (digit count, commas, decimals, percent)."""
    m = _NUMBER.fullmatch(text)
    whole, frac, pct = m.group(1), m.group(2) or "", m.group(3)
    digits = whole.replace(",", "")
    d = len(digits)
    if (digits in ("0", "1") and not frac) or (pct and d >= 3):
        return text  # "1 item", "0", "100%" carry meaning the question's wording depends on
    v = rng.randint(2 if d == 1 else 10 ** (d - 1), 10 ** d - 1)
    s = f"{v:,}" if "," in whole else str(v)
    if frac:
        s += "." + "".join(str(rng.randint(0, 9)) for _ in range(len(frac) - 1))
    return s + pct


_FIRST_NAME = re.compile(r"\b(" + "|".join(FIRST_NAMES) + r")\b")


def variant_question(question: str, rng: random.Random) -> str:
    """`question` with each distinct number replaced by a random one of the same shape and each
    first name from FIRST_NAMES by another, consistently within the question (the same number or
    name maps to the same replacement everywhere it occurs)."""
    nums: dict[str, str] = {}

    def num(m):
        t = m.group(0)
        if t not in nums:
            nums[t] = _new_number(t, rng)
        return nums[t]

    out = _NUMBER.sub(num, question)
    names: dict[str, str] = {}
    found = set(_FIRST_NAME.findall(out))  # whole words only, so no name hides another
    present = [n for n in FIRST_NAMES if n in found]
    pool = [n for n in FIRST_NAMES if n not in present]
    rng.shuffle(pool)
    for n, new in zip(present, pool):
        names[n] = new
    if names:
        out = re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b",
                     lambda m: names[m.group(1)], out)
    return out


def gsm8k_variants(data_dir: str, n: int, seed: int = 0) -> tuple[list[dict], dict]:
    """n variant prompts of the gsm8k *training* rows (row < n_rows // 2): item i rewrites row
    i % rows with variant_question, seeded by (seed, row, i // rows); deterministic, and the first
    k items do not depend on n. Ids "gsm8k-variant/<row>/<j>"."""
    idx, rows, info = _gsm8k_rows(data_dir, False)
    rows = [rows[i] for i in idx]
    out = []
    for i in range(n):
        r, j = i % len(rows), i // len(rows)
        q = variant_question(rows[r]["question"], random.Random(f"{seed}/{r}/{j}"))
        out.append({"source": "gsm8k-variant", "id": f"gsm8k-variant/{r}/{j}",
                    "prompt": _item("gsm8k", r, {**rows[r], "question": q})["prompt"]})
    return out, {"from_rows": info["used_rows"], "per_row": -(-n // len(rows)), "seed": seed}


def _head(text: str) -> str:
    return " ".join(text.split())[:60].lower()


BENCHMARKS = (("gsm8k", "question"), ("math500", "problem"), ("humaneval", "prompt"),
              ("mbpp", "text"))


def benchmark_heads(data_dir: str, strict: bool = True) -> tuple[set[str], list[str]]:
    """(starts of every item of the benchmark files in data_dir: first 60 characters, spaces
    collapsed, lower case; all rows, training and held-out halves alike, and the benchmarks
    whose file is absent). strict: an absent file is an error."""
    heads, missing = set(), []
    for name, field in BENCHMARKS:
        try:
            rows = read_rows(data_dir, name)[0]
        except FileNotFoundError:
            if strict:
                raise
            missing.append(name)
            continue
        heads.update(_head(r[field]) for r in rows if r.get(field))
    return heads, missing


def filter_prompts(items: list[dict], heads: set[str]) -> tuple[list[dict], int]:
    """Items whose prompt does not start like a benchmark item (its head, or the whole of an
    item shorter than a head), and how many were dropped."""
    short = [h for h in heads if len(h) < 60]

    def like(text: str) -> bool:
        h = _head(text)
        return h in heads or any(h.startswith(x) for x in short)

    kept = [it for it in items if not like(it["prompt"])]
    return kept, len(items) - len(kept)


def read_prompts_file(path: str, heads: set[str]) -> tuple[list[dict], dict]:
    """--prompts-file: JSON lines with a "prompt" (the user turn; optional "id", "source"), as
    self_instruct.py writes them. Prompts that start like a benchmark item are dropped (counted)."""
    items = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e})") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("prompt"), str) \
                    or not rec["prompt"].strip():
                raise ValueError(f"{path}:{n}: each line needs a non-empty \"prompt\" string")
            items.append({"id": str(rec.get("id", f"file/{n}")),
                          "source": str(rec.get("source", "prompts-file")),
                          "prompt": rec["prompt"]})
    kept, dropped = filter_prompts(items, heads)
    return kept, {"path": os.path.abspath(path), "lines": len(items),
                  "dropped_benchmark_like": dropped}


def training_prompts(data_dir: Optional[str], sources=TRAIN_SOURCES, synthetic: int = 0,
                     max_prompts: Optional[int] = None, seed: int = 0,
                     gsm8k_variants_n: int = 0, prompts_files=()) -> tuple[list[dict], dict]:
    """Training prompts (see the split above) and a JSON-able description of what was used.
    A prompt text that occurs twice (templated synthetic prompts can) is kept once.

    With max_prompts, a seeded random subset of that size is kept (sources mixed); the order is
    shuffled either way. data_dir may be None only when sources is empty (synthetic only)."""
    from specpilot.train_drafter.synthetic import family_of, synthetic_prompts

    items, info = [], {"split": dict(SPLIT_DESCRIPTION), "sources": {}}
    for src in sources:
        if src not in TRAIN_SOURCES:
            raise ValueError(f"unknown training source {src!r}; known: {TRAIN_SOURCES} "
                             "(humaneval and math500 are held out and never trained on)")
        if data_dir is None:
            raise ValueError("--data-dir is required for the gsm8k/mbpp prompt sources")
        its, src_info = _gsm8k(data_dir, False) if src == "gsm8k" else _mbpp(data_dir, False)
        items += its
        info["sources"][src] = {**src_info, "available_prompts": len(its)}
    if gsm8k_variants_n:
        if data_dir is None:
            raise ValueError("--data-dir is required for --gsm8k-variants")
        var, var_info = gsm8k_variants(data_dir, gsm8k_variants_n, seed)
        items += var
        info["sources"]["gsm8k-variant"] = {"available_prompts": len(var), **var_info}
    if synthetic:
        syn = synthetic_prompts(synthetic, seed)
        items += syn
        families: dict = {}
        for i in range(len(syn)):
            families[family_of(i)] = families.get(family_of(i), 0) + 1
        info["sources"]["synthetic"] = {"available_prompts": len(syn), "seed": seed,
                                        "families": families}
    if prompts_files:  # e.g. written by the target itself (self_instruct.py)
        heads, missing = benchmark_heads(data_dir, strict=False) if data_dir else (set(), [])
        files = []
        for path in prompts_files:
            its, file_info = read_prompts_file(path, heads)
            items += its
            files.append(file_info)
        info["sources"]["prompts-files"] = {"files": files, "benchmarks_not_checked":
                                            missing if data_dir else "all (no --data-dir)"}
    if not items:
        raise ValueError("no training prompts: give --data-dir sources and/or --synthetic N")
    seen: set = set()
    unique = [it for it in items if not (it["prompt"] in seen or seen.add(it["prompt"]))]
    info["duplicates_dropped"] = len(items) - len(unique)  # templated prompts can repeat
    items = unique
    random.Random(seed).shuffle(items)
    if max_prompts is not None and max_prompts < len(items):
        items = items[:max_prompts]
        info["subset_ids"] = sorted(it["id"] for it in items)
    info["prompts"] = len(items)
    info["prompts_by_source"] = {s: sum(it["source"] == s for it in items)
                                 for s in sorted({it["source"] for it in items})}
    return items, info


def eval_prompts(data_dir: str, split: str, limit: Optional[int] = None) -> list[dict]:
    """The first `limit` items of a held-out split, in file order."""
    if split == "gsm8k-heldout":
        items = _gsm8k(data_dir, True)[0]
    elif split == "mbpp-test":
        items = _mbpp(data_dir, True)[0]
    elif split in ("math500", "humaneval"):
        rows = read_rows(data_dir, split)[0]
        items = [{"source": split, **_item(split, i, r)} for i, r in enumerate(rows)]
    else:
        raise ValueError(f"unknown split {split!r}; known: {EVAL_SPLITS}")
    return items if limit is None else items[:limit]


def render(tokenizer, text: str) -> list[int]:
    """Token ids of `text` as one user turn through the chat template, generation prompt added."""
    return render_many(tokenizer, [text])[0]


def render_many(tokenizer, texts: list[str]) -> list[list[int]]:
    """render() of each text: the chat template applied to each (text only), then one batched
    tokenizer call without added special tokens (what apply_chat_template(tokenize=True) does
    one at a time; the batched call is many times faster for tens of thousands of prompts)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the target's tokenizer has no chat template; training data is rendered "
                         "as chat turns")
    if not texts:
        return []
    chats = tokenizer.apply_chat_template([[{"role": "user", "content": t}] for t in texts],
                                          add_generation_prompt=True, tokenize=False)
    return [[int(t) for t in ids] for ids in
            tokenizer(chats, add_special_tokens=False)["input_ids"]]
