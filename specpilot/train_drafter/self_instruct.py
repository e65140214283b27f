"""Training prompts written by the target itself: `python -m specpilot.train_drafter.self_instruct`.

The held-out tau of a drafter trained on gsm8k variants (the training rows with new numbers and
names) stays well below its tau on the rows it was trained on: the variants add numbers, not new
problems. Here the target writes new problems. It is asked, with sampling (temperature 1.0,
top-p 0.95, a seed per request), to write one problem from an instruction built from a kind and
a topic, and each answer is cleaned into one problem (clean_problem) and formatted the way the
scorer formats the benchmark it imitates (specpilot.evals.datasets):
  word          a grade-school word problem   -> gsm8k's shape   "<problem>\\n<STEP_BY_STEP>"
  competition   a competition-style problem   -> math500's shape "<problem>\\n<STEP_BY_STEP>"
  code          a Python exercise             -> mbpp's reply instruction, without tests
No benchmark text is shown to the target. A problem that starts like any item of gsm8k,
math500, humaneval or mbpp (the same first 60 characters, spaces collapsed, case ignored) is
dropped (prompts.benchmark_heads, prompts.filter_prompts), as are duplicates and answers that
are not one problem.

The result is a JSON-lines file of {"id", "source": "self-instruct/<kind>", "prompt"} that
`python -m specpilot.train_drafter --prompts-file FILE` adds to its training prompts; the
target's continuations of them are then generated, cached and trained on like any other prompt.
The raw answers are cached per instruction in --work-dir (data.generate_completions), so an
interrupted run resumes and a larger --n reuses what was written before.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from typing import Optional

from specpilot.evals.datasets import STEP_BY_STEP
from specpilot.train_drafter.cli import default_gen_admit
from specpilot.train_drafter.prompts import benchmark_heads, filter_prompts

TOPICS = (
    "a bakery", "a school trip", "a garden", "a bookshop", "a train journey", "a farm",
    "a birthday party", "a football team", "a library", "a car wash", "a lemonade stand",
    "a zoo", "a bike ride", "a pizza restaurant", "a toy store", "a camping trip", "a museum",
    "a fish tank", "a swimming pool", "a concert", "a hardware store", "a bus route",
    "a science fair", "a coffee shop", "a pet shelter", "a marathon", "a fruit market",
    "a movie theater", "a clothing sale", "a painting class", "a chess club", "a road trip",
    "a recycling drive", "a cookie sale", "a hotel", "a basketball game", "an apple orchard",
    "a summer job", "a savings account", "a phone plan", "a dog walker", "a construction site",
    "a flower shop", "a music lesson", "a picnic", "a snowstorm", "a water park", "a sandwich shop",
    "a classroom", "an ice cream truck", "a charity run", "a candle maker", "a beekeeper",
    "a fishing trip", "a video game", "a carpenter", "a quilt", "a parking lot",
    "a raffle", "a school election", "a soap factory", "a newspaper route",
)
# competition areas (math500's subjects) and, per area, topics an instruction names, so the
# problems spread over more than the 7 area names alone would give
AREA_TOPICS = {
    "algebra": ("linear equations", "quadratic equations", "systems of equations", "inequalities",
                "exponents", "arithmetic sequences", "functions and their graphs",
                "word problems with rates"),
    "geometry": ("triangles", "circles", "areas of polygons", "volumes of solids",
                 "similar triangles", "coordinates of points", "angles", "the Pythagorean theorem"),
    "number theory": ("divisors", "primes", "remainders", "greatest common divisors",
                      "digits of numbers", "bases other than ten", "modular arithmetic"),
    "counting and probability": ("dice", "coins", "cards", "choosing committees",
                                 "arrangements of letters", "paths on a grid", "expected value",
                                 "drawing balls from a bag"),
    "precalculus": ("trigonometric identities", "complex numbers", "vectors", "matrices",
                    "polar coordinates", "sums of series"),
    "intermediate algebra": ("polynomials and their roots", "logarithms", "functional equations",
                             "sequences", "absolute values", "rational functions",
                             "maximum and minimum values"),
    "prealgebra": ("fractions", "percentages", "ratios", "averages", "unit conversions",
                   "simple equations", "order of operations"),
}
AREAS = tuple(AREA_TOPICS)
CODE_TOPICS = ("strings", "lists", "dictionaries", "sorting", "prime numbers", "dates",
               "matrices", "tuples", "sets", "recursion", "binary numbers", "words in a sentence",
               "digits of a number", "intervals", "geometry formulas", "running totals")
KINDS = {
    "word": ("Write a new math word problem about {topic} for a middle-school student. Solving it "
             "should take two or three steps of arithmetic. Write only the problem, not the "
             "answer."),
    "competition": ("Write one {area} problem about {area_topic} in the style of a high-school "
                    "mathematics competition. Use LaTeX for formulas. Write only the problem "
                    "statement, not the solution."),
    "code": ("Write a short Python programming exercise about {topic}: say which function to "
             "write, its arguments and what it must return. Do not write the solution."),
}
DEFAULT_MIX = "word:0.5,competition:0.3,code:0.2"
# a line starting like this ends the problem: the target went on to answer it
_STOP = re.compile(r"^\s*(\**\s*)?(solution|answer|step 1|to solve|let's|let us|we can|"
                   r"here is|here's|```)", re.IGNORECASE)
_LABEL = re.compile(r"^\s*(\**\s*)?(problem|question|exercise|task)\s*(\d+)?\s*[:.]\s*(\**)?\s*",
                    re.IGNORECASE)


def parse_mix(text: str) -> dict[str, float]:
    """"word:0.5,competition:0.3,code:0.2" -> {kind: weight}; kinds from KINDS, weights > 0."""
    mix = {}
    for part in text.split(","):
        kind, _, w = part.partition(":")
        kind = kind.strip()
        if kind not in KINDS:
            raise ValueError(f"unknown self-instruct kind {kind!r}; known: {sorted(KINDS)}")
        try:
            mix[kind] = float(w)
        except ValueError:
            raise ValueError(f"bad weight in {part!r} (expected kind:weight)") from None
        if mix[kind] <= 0:
            raise ValueError(f"weight of {kind!r} must be > 0")
    return mix


def instructions(n: int, seed: int = 0, mix: Optional[dict[str, float]] = None) -> list[dict]:
    """n instructions {"kind", "text"}, deterministic in (n, seed, mix); instruction i does not
    depend on n, so a larger n extends the same list."""
    mix = mix or parse_mix(DEFAULT_MIX)
    kinds, weights = list(mix), [mix[k] for k in mix]
    out = []
    for i in range(n):
        rng = random.Random(f"self-instruct/{seed}/{i}")
        kind = rng.choices(kinds, weights)[0]
        area = rng.choice(AREAS)
        fill = {"topic": rng.choice(CODE_TOPICS if kind == "code" else TOPICS),
                "area": area, "area_topic": rng.choice(AREA_TOPICS[area])}
        out.append({"kind": kind, "text": KINDS[kind].format(**fill)})
    return out


def draws(prompts: list[list[int]]) -> list[tuple[list[int], int]]:
    """Jobs (prompt, k) for data.generate_completions: k numbers the earlier instructions with
    the same text, so each repeat is its own sampled draw (its own seed and cache entry) rather
    than the same job again. k depends only on the instructions before, so a larger n extends
    the same jobs."""
    seen: dict[tuple[int, ...], int] = {}
    jobs = []
    for p in prompts:
        k = seen.get(tuple(p), 0)
        seen[tuple(p)] = k + 1
        jobs.append((p, k))
    return jobs


def clean_problem(text: str, kind: str) -> Optional[str]:
    """The problem in one answer of the target, or None when there is none: leading labels
    ("Problem 1:") dropped, cut before a line that starts a solution, blank-line runs collapsed;
    kept when 30-700 characters long, not ending in ':' and (word, competition) holding a digit
    or a formula."""
    lines = []
    for line in text.replace("\r", "").split("\n"):
        if _STOP.match(line) and any(x.strip() for x in lines):
            break
        lines.append(line.rstrip())
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    body = _LABEL.sub("", body, count=1).strip().strip("*").strip()
    if not 30 <= len(body) <= 700 or body.endswith(":"):
        return None
    if kind in ("word", "competition") and not re.search(r"[0-9$\\]", body):
        return None
    return body


def as_prompt(problem: str, kind: str) -> str:
    """The user turn for a problem, in the shape the scorer gives the benchmark it imitates."""
    if kind == "code":
        return f"{problem}\nReply with the Python code in a ```python code block."
    return f"{problem}\n{STEP_BY_STEP}"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m specpilot.train_drafter.self_instruct",
        description="Have the target write new training problems (see the module docstring); "
                    "writes a JSON-lines file for `python -m specpilot.train_drafter "
                    "--prompts-file`.")
    ap.add_argument("--target", required=True, help="target HF folder (config, weights, tokenizer)")
    ap.add_argument("--data-dir", required=True,
                    help="folder with the benchmark files (problems starting like one are dropped)")
    ap.add_argument("--out", required=True, help="JSON-lines file to write")
    ap.add_argument("--n", type=int, required=True, help="instructions to send (problems asked)")
    ap.add_argument("--mix", default=DEFAULT_MIX, help=f"kind:weight list (default {DEFAULT_MIX})")
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--gen-backend", default="engine", choices=["hf", "engine"])
    ap.add_argument("--gen-batch-size", type=int, default=256)
    ap.add_argument("--gen-admit", type=int, default=None, metavar="N",
                    help="engine backend: start waiting jobs N at a time (default: an eighth of "
                         "--gen-batch-size; see train_drafter)")
    ap.add_argument("--work-dir", default=None,
                    help="cache of the raw answers (default $SPECPILOT_CACHE/train_drafter)")
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="stop generating at this budget; the file gets what was written")
    ap.add_argument("--device", default=None)
    ap.add_argument("--seed", type=int, default=0)
    return ap


def main(argv=None) -> int:
    t0 = time.monotonic()
    ap = build_parser()
    a = ap.parse_args(argv)
    if not os.path.isfile(os.path.join(a.target, "config.json")):
        ap.error(f"--target {a.target!r} is not a Hugging Face model folder (no config.json)")
    if not os.path.isdir(a.data_dir):
        ap.error(f"--data-dir {a.data_dir!r} is not a folder")
    if a.gen_admit is None:
        a.gen_admit = default_gen_admit(a.gen_batch_size)
    if a.n <= 0 or a.max_new_tokens < 8 or a.gen_batch_size < 1 or a.gen_admit < 1:
        ap.error("--n must be > 0, --max-new-tokens >= 8, --gen-batch-size and --gen-admit >= 1")
    if not (a.temperature > 0 and 0 < a.top_p <= 1):
        ap.error("--temperature must be > 0 and --top-p in (0, 1]")
    try:
        mix = parse_mix(a.mix)
        heads, _ = benchmark_heads(a.data_dir)
    except (ValueError, FileNotFoundError) as e:
        ap.error(str(e))
    from transformers import AutoConfig, AutoTokenizer

    from specpilot.engine.model_runner import eos_ids, resolve_device
    from specpilot.train_drafter import data
    from specpilot.train_drafter.cli import default_work_dir
    from specpilot.train_drafter.prompts import render_many
    from specpilot.train_drafter.train import make_generator, target_dtype

    device = resolve_device(a.device)
    tok = AutoTokenizer.from_pretrained(a.target)
    asks = instructions(a.n, a.seed, mix)
    jobs = draws(render_many(tok, [x["text"] for x in asks]))
    dtype = target_dtype(device)
    eos = eos_ids(a.target, AutoConfig.from_pretrained(a.target))
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos[0]
    gen = make_generator(a.gen_backend, a.target, device, a.gen_batch_size,
                         max(len(p) for p, _ in jobs) + 8, a.max_new_tokens, eos, pad,
                         min_admit=a.gen_admit)
    sampling = {"temperature": a.temperature, "top_p": a.top_p, "seed": a.seed,
                "purpose": "self-instruct"}
    work = a.work_dir or default_work_dir()
    key = data.settings_key(a.target, a.max_new_tokens, dtype, sampling)
    deadline = None if a.max_minutes is None else t0 + 60 * a.max_minutes
    outs = data.generate_completions(gen, jobs, a.gen_batch_size, work, key, a.max_new_tokens,
                                     deadline, sampling)
    items, seen = [], set()
    stats = {"asked": a.n, "answered": 0, "not_a_problem": 0, "duplicates": 0}
    for i, (ask, out) in enumerate(zip(asks, outs)):
        if out is None:
            continue
        stats["answered"] += 1
        text = tok.decode([t for t in out if t not in eos], skip_special_tokens=True)
        problem = clean_problem(text, ask["kind"])
        if problem is None:
            stats["not_a_problem"] += 1
        elif problem in seen:
            stats["duplicates"] += 1
        else:
            seen.add(problem)
            items.append({"id": f"self-instruct/{i}", "source": f"self-instruct/{ask['kind']}",
                          "prompt": as_prompt(problem, ask["kind"])})
    items, stats["dropped_benchmark_like"] = filter_prompts(items, heads)
    stats["written"] = len(items)
    stats["by_kind"] = {k: sum(it["source"].endswith("/" + k) for it in items) for k in KINDS}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        for it in items:
            f.write(json.dumps(it) + "\n")
    print(f"self-instruct: {json.dumps(stats)} -> {a.out} "
          f"({time.monotonic() - t0:.0f}s)", file=sys.stderr)
    return 0 if items else 1


if __name__ == "__main__":
    sys.exit(main())
