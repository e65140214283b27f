"""Token-forcing validation of an engine against `ar` (the core of scripts/validate.py).

Two directions, each over the same prompts (chat-templated benchmark prompts):
  ar->ENGINE  ar's greedy outputs are forced through ENGINE: at every position the engine's own
              argmax (along its own decode / verify path) must be the token ar emitted;
  ENGINE->ar  ENGINE's greedy outputs are forced through ar: every token the engine emitted must
              be ar's argmax given the tokens before it.
Greedy outputs are produced with ignore_eos (exactly max_new_tokens tokens). A position where the
argmax differs is a *disagreement*; it is a *near-tie* when the forced engine's top-2 logit gap
there is below the threshold (kernels of different shapes may flip such ties: DESIGN.md). The
validation passes iff every disagreement in both directions is a near-tie.

Engines are objects with `generate(prompts, SamplingParams) -> [RequestOutput]` and
`force(prompts, forced) -> per prompt [(argmax, gap), ...]` (specpilot.offline.OfflineEngine).
`make_engine(name)` builds one; engines are built at most twice each and dropped between
phases unless `keep_loaded` (GPU memory: the target may not fit twice).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Callable, Optional


@dataclass
class DirectionReport:
    name: str  # e.g. "ar->stock"
    positions: int = 0
    agree: int = 0
    disagreements: list[dict] = field(default_factory=list)  # dataset, id, position, forced,
    per_prompt: list[dict] = field(default_factory=list)  # argmax, gap, near_tie

    @property
    def failures(self) -> list[dict]:
        return [d for d in self.disagreements if not d["near_tie"]]


def check_direction(name: str, items: list[dict], forced: list[list[int]],
                    checks: list[list[tuple[int, float]]], threshold: float) -> DirectionReport:
    """Compare the forced tokens with the engine's argmax at every position."""
    rep = DirectionReport(name)
    for it, toks, chk in zip(items, forced, checks):
        if len(chk) != len(toks):
            raise RuntimeError(f"{name}: {it['id']}: {len(chk)} checks for {len(toks)} forced tokens")
        agree = [int(a) == int(t) for t, (a, _) in zip(toks, chk)]
        rep.positions += len(agree)
        rep.agree += sum(agree)
        rep.per_prompt.append({"dataset": it["dataset"], "id": it["id"], "agree": agree,
                               "gap": [round(float(g), 6) for _, g in chk]})
        for pos, (ok, t, (a, g)) in enumerate(zip(agree, toks, chk)):
            if not ok:
                rep.disagreements.append({"dataset": it["dataset"], "id": it["id"],
                                          "position": pos, "forced": int(t), "argmax": int(a),
                                          "gap": float(g), "near_tie": float(g) < threshold})
    return rep


def _free(engine) -> None:
    del engine
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:  # pragma: no cover
        pass


def validate(items: list[dict], make_engine: Callable[[str], object], engine: str,
             max_new_tokens: int, threshold: float, keep_loaded: bool = True,
             progress: Optional[Callable[[str], None]] = None) -> dict:
    """Run both directions; returns {"passed", "directions": [DirectionReport, ...], ...}.

    items: [{"dataset", "id", "input_ids"}]."""
    from specpilot.core import SamplingParams

    step = progress or (lambda msg: None)
    prompts = [it["input_ids"] for it in items]
    greedy = SamplingParams(temperature=0, max_new_tokens=max_new_tokens, ignore_eos=True)
    step("load ar")
    ar = make_engine("ar")
    step("ar: greedy outputs")
    ref = [list(o.output_ids) for o in ar.generate(prompts, greedy)]
    if engine == "ar":
        test = ar
    else:
        if not keep_loaded:
            _free(ar)
            ar = None
        step(f"load {engine}")
        test = make_engine(engine)
    step(f"{engine}: forced ar outputs")
    fwd_checks = test.force(prompts, ref)
    step(f"{engine}: greedy outputs")
    outs = [list(o.output_ids) for o in test.generate(prompts, greedy)]
    if ar is None:
        _free(test)
        test = None
        step("load ar again")
        ar = make_engine("ar")
    step(f"ar: forced {engine} outputs")
    back_checks = ar.force(prompts, outs)
    fwd = check_direction(f"ar->{engine}", items, ref, fwd_checks, threshold)
    back = check_direction(f"{engine}->ar", items, outs, back_checks, threshold)
    same = sum(1 for a, b in zip(ref, outs) if a == b)
    return {"engine": engine, "threshold": threshold, "max_new_tokens": max_new_tokens,
            "prompts": len(items), "identical_outputs": same,
            "passed": not fwd.failures and not back.failures, "directions": [fwd, back]}


def report_text(result: dict) -> str:
    lines = [f"token forcing: {result['engine']} vs ar, {result['prompts']} prompts x "
             f"{result['max_new_tokens']} tokens, near-tie threshold {result['threshold']:g} "
             f"(top-2 logit gap); greedy outputs identical for {result['identical_outputs']}/"
             f"{result['prompts']} prompts"]
    for d in result["directions"]:
        lines.append(f"  {d.name:<16} {d.agree}/{d.positions} positions agree, "
                     f"{len(d.disagreements)} disagreement(s), {len(d.failures)} not near-ties")
        for x in d.disagreements:
            lines.append(f"    {'near-tie' if x['near_tie'] else 'FAIL    '} {x['dataset']} "
                         f"{x['id']} position {x['position']}: forced {x['forced']}, argmax "
                         f"{x['argmax']}, top-2 gap {x['gap']:.4g}")
    if not result["passed"]:
        lines.append("FAILED: some disagreement is not a near-tie")
    elif any(d.disagreements for d in result["directions"]):
        lines.append("PASSED: every disagreement is a near-tie")
    else:
        lines.append("PASSED: the argmax agrees at every position")
    return "\n".join(lines)
