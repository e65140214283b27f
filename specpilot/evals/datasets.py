"""Benchmark and eval prompt sets: gsm8k, humaneval, math500, mbpp (scored) and chat (speed only).

Where the data comes from, first found wins:
  1. $SPECPILOT_EVAL_DATA (a folder holding the files below);
  2. data/evals/ in the repository (copies of ../shared/data/evals/, see its README.md);
  3. ../shared/data/evals/ beside the repository;
  4. online only (HF_HUB_OFFLINE unset) and with the `datasets` package installed: the usual hub
     datasets (openai/gsm8k main/test, openai/openai_humaneval, HuggingFaceH4/MATH-500,
     google-research-datasets/mbpp full, all splits). chat exists only in the repository.
A local file whose sha256 differs from the one recorded here is refused (ValueError).

Items are dicts {"dataset", "id", "prompt" (the user message), "ref" (the raw row)}.
`select(name, n)` is deterministic: the first n items in file order (mbpp: its test split,
task_ids 11-510). `encode(tokenizer, item)` applies the chat template (add_generation_prompt).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
FILES = {"gsm8k": "gsm8k_test.jsonl", "humaneval": "humaneval.jsonl",
         "math500": "math500_test.jsonl", "mbpp": "mbpp.jsonl", "chat": "chat.jsonl"}
SHA256 = {
    "gsm8k_test.jsonl": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
    "humaneval.jsonl": "1d49078ba3e2b196b9344535bef34a43021f038fad9561d6ee7c53450609a6a2",
    "math500_test.jsonl": "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132",
    "mbpp.jsonl": "ccf64ceae9c5403bf50a044cb6d505bfd2a2963ee58338ba268fd65beab92a9f",
    "chat.jsonl": "ed4039fd6b57efc5584991e48948e368131d233185e77f26966dd6fd207d9cd8",
}
HUB = {"gsm8k": ("openai/gsm8k", "main"), "humaneval": ("openai/openai_humaneval", None),
       "math500": ("HuggingFaceH4/MATH-500", None), "mbpp": ("google-research-datasets/mbpp", "full")}
SCORED = ("gsm8k", "humaneval", "math500", "mbpp")
MBPP_TEST = range(11, 511)
STEP_BY_STEP = "Please reason step by step, and put your final answer within \\boxed{}."


def data_dirs() -> list[Path]:
    dirs = [REPO_ROOT / "data" / "evals", REPO_ROOT.parent / "shared" / "data" / "evals"]
    env = os.environ.get("SPECPILOT_EVAL_DATA")
    return ([Path(env).expanduser()] if env else []) + dirs


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def find_file(name: str) -> Optional[Path]:
    fname = FILES[name]
    for d in data_dirs():
        if (d / fname).is_file():
            return d / fname
    return None


@lru_cache(maxsize=None)
def _read_checked(path: str) -> tuple:
    data = Path(path).read_bytes()
    want = SHA256.get(Path(path).name)
    got = hashlib.sha256(data).hexdigest()
    if want and got != want:
        raise ValueError(f"{path}: sha256 {got} differs from the recorded {want}; "
                         "restore the file (see data/evals/README.md)")
    return tuple(json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip())


def _from_hub(name: str) -> list[dict]:
    if name not in HUB:
        raise FileNotFoundError(f"{FILES[name]} not found in {[str(d) for d in data_dirs()]}")
    if _offline():
        raise FileNotFoundError(f"{FILES[name]} not found in {[str(d) for d in data_dirs()]} and "
                                "HF_HUB_OFFLINE=1 forbids loading it from the hub")
    try:
        import datasets  # optional: only for the online fallback
    except ImportError:
        raise FileNotFoundError(f"{FILES[name]} not found locally; loading {HUB[name][0]} from the "
                                "hub needs `pip install datasets` (or set SPECPILOT_EVAL_DATA)") from None
    repo, config = HUB[name]
    dd = datasets.load_dataset(repo, config)
    if name == "mbpp":  # our file is all 974 tasks: every split, in task_id order
        rows = sorted((r for split in dd.values() for r in split), key=lambda r: r["task_id"])
    else:
        rows = list(dd["test"])
    return [dict(r) for r in rows]


def load_rows(name: str) -> list[dict]:
    """The raw rows of a set (see the module docstring for where they come from)."""
    if name not in FILES:
        raise ValueError(f"unknown dataset {name!r}; known: {list(FILES)}")
    path = find_file(name)
    return list(_read_checked(str(path))) if path else _from_hub(name)


def _item(name: str, i: int, row: dict) -> dict:
    if name == "gsm8k":
        return {"id": f"gsm8k/{i}", "prompt": f"{row['question']}\n{STEP_BY_STEP}"}
    if name == "math500":
        return {"id": row["unique_id"], "prompt": f"{row['problem']}\n{STEP_BY_STEP}"}
    if name == "humaneval":
        return {"id": row["task_id"],
                "prompt": "Complete the following Python function. Reply with the complete "
                          f"function in a ```python code block.\n\n```python\n{row['prompt']}```"}
    if name == "mbpp":
        tests = "\n".join(row["test_list"])
        return {"id": f"mbpp/{row['task_id']}",
                "prompt": f"{row['text']}\nYour code should pass these tests:\n{tests}\n"
                          "Reply with the Python code in a ```python code block."}
    return {"id": row["id"], "prompt": row["prompt"]}


def items(name: str) -> list[dict]:
    rows = load_rows(name)
    if name == "mbpp":
        rows = [r for r in rows if r["task_id"] in MBPP_TEST]
    return [{"dataset": name, **_item(name, i, r), "ref": r} for i, r in enumerate(rows)]


def select(name: str, n: Optional[int] = None) -> list[dict]:
    """The first n items of a set (all when n is None)."""
    its = items(name)
    return its if n is None else its[:n]


def by_id(name: str) -> dict[str, dict]:
    return {it["id"]: it for it in items(name)}


def encode(tokenizer, item: dict, chat_template_kwargs: Optional[dict] = None) -> list[int]:
    """Token ids of the item's prompt as one user turn, with the generation prompt appended."""
    messages = [{"role": "user", "content": item["prompt"]}]
    if getattr(tokenizer, "chat_template", None):
        out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                            **(chat_template_kwargs or {}))
        ids = out["input_ids"] if hasattr(out, "keys") else out
        return [int(t) for t in (ids[0] if ids and isinstance(ids[0], list) else ids)]
    return list(tokenizer(item["prompt"])["input_ids"])
