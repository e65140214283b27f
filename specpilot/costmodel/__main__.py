"""`python -m specpilot.costmodel`: the gap-to-ceiling report of one decode step.

    python -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 \
        --batch 1 --context 256 --block 8 --accept 4.8 [--measure] [--json out.json]
    python -m specpilot.costmodel --setting h200_c1_muse-glimmer-30b_dflash2 --accept 6.5
    python -m specpilot.costmodel --target qwen38-27b --drafter qwen38-27b-dflash2 \
        --batch 1,4,8,16,32 --accept 4.8 --measure     (one report per batch, one engine)

    python -m specpilot.costmodel --target qwen38-27b --weight-format w12 --measure
        (ar with every linear layer in W12: floors at 1.5 B per weight, and with
        --measure the engine converts its random weights at load, as --weight-format w12 does)

--target / --drafter: a folder under specpilot/model_configs or any folder with a config.json.
--setting: a settings folder; its hub repos map to specpilot/model_configs (KNOWN_REPOS), its
stock flags give the block, its concurrency the default batch and its gpu the nominal rates
(counts.NOMINAL_RATES; the H200's otherwise). --engine ar drops the drafter;
--engine final (settings only) is stock with the flags of final's landed mechanisms that the
model counts (--weight-format; any other landed flag is an error, not ignored).
Without --measure the report has the analytic floors only (CPU is fine). --measure (CUDA only)
builds the engine with random weights of these shapes, measures the copy bandwidth and bf16
matrix rate (they replace the nominal rates unless --bw / --flops are given), and times ar and
stock steps at SIMULATED acceptance --accept (random drafters accept nothing); times inside the
CUDA graphs come from a kernel profile of the graphs (torch.profiler, kernels matched to the
components of an eager run of the same code; --no-kernel-profile: from timing spans corrected
for their measured cost instead; --json has both, the raw span times and the calibration).
With the kernel profile, the host gap is also split by what the host does while the GPU idles
(schedule, worker batch, graph inputs, launch, sampling and its copy, processing results: a
torch.profiler pass with those phases as ranges).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

MODEL_CONFIGS = Path(__file__).resolve().parents[1] / "model_configs"
KNOWN_REPOS = {  # settings' hub repos -> folders under specpilot/model_configs
    "Qwen/Qwen3.8-27B": "qwen38-27b",
    "meta-models/Muse-Glimmer-30B": "muse-glimmer-30b",
    "z-lab/Qwen3.8-27B-DFlash2": "qwen38-27b-dflash2",
    "z-lab/Muse-Glimmer-30B-DFlash2": "muse-glimmer-30b-dflash2",
    "RadixArk/Qwen3.8-27B-DSpark": "qwen38-27b-dspark",
    "DaoCloud/Muse-Glimmer-30B-DSpark": "muse-glimmer-30b-dspark",
}


class CostModelError(ValueError):
    """A wrong command line: the message says what to give instead."""


def config_dir(name: str, role: str) -> Path:
    """A model_configs name or a folder holding config.json."""
    for p in (Path(name).expanduser(), MODEL_CONFIGS / name):
        if (p / "config.json").is_file():
            return p.resolve()
    known = ", ".join(sorted(p.name for p in MODEL_CONFIGS.iterdir() if p.is_dir()))
    raise CostModelError(f"unknown {role} {name!r}: not a folder with config.json, nor one of "
                         f"specpilot/model_configs ({known})")


MODELLED_FINAL_FLAGS = ("--weight-format",)   # final's flags beyond stock the counts take


def from_setting(name: str, engine: Optional[str]
                 ) -> tuple[str, Optional[str], Optional[int], int, str, str]:
    """(target, drafter or None, block or None, concurrency, weight format, gpu) of a settings
    folder; the weight format is the engine's --weight-format (final: what has landed)."""
    from specpilot.settings import SettingsError, load

    try:
        s = load(name)
    except SettingsError as e:
        raise CostModelError(str(e)) from None

    def mapped(model) -> str:
        if model.source != "hub" or model.repo not in KNOWN_REPOS:
            raise CostModelError(
                f"setting {s.name}: {model.role} {model.repo or model.source!r} has no config "
                f"under specpilot/model_configs; known repos: {', '.join(sorted(KNOWN_REPOS))} "
                f"(or give --target / --drafter folders)")
        return KNOWN_REPOS[model.repo]

    flags = s.flags(engine or "stock")
    if engine == "final":
        stock = s.flags("stock")
        other = sorted(k for k, v in flags.items()
                       if stock.get(k) != v and k not in MODELLED_FINAL_FLAGS)
        if other:
            raise CostModelError(
                f"setting {s.name}: final's landed flags {', '.join(other)} are not modelled "
                f"(the cost model counts {', '.join(MODELLED_FINAL_FLAGS)}); use --engine stock")
    drafter, block = None, None
    if engine != "ar" and s.drafter is not None:
        drafter = mapped(s.drafter)
        block = s.flags("stock").get("--speculative-num-draft-tokens")
    return (mapped(s.target), drafter, block, s.concurrency,
            str(flags.get("--weight-format", "auto")), s.gpu)


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    from specpilot.costmodel.counts import H200_BF16_FLOPS, H200_HBM_BW

    ap = argparse.ArgumentParser(
        prog="python -m specpilot.costmodel",
        description="Roofline floors and gap to ceiling of one decode step.")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--target", help="model_configs name or folder with config.json")
    src.add_argument("--setting", help="settings folder name (target, drafter and block from it)")
    ap.add_argument("--drafter", help="drafter model_configs name or folder (stock engine)")
    ap.add_argument("--engine", choices=("ar", "stock", "final"), default=None,
                    help="default: stock when a drafter is given, else ar; final: a setting's "
                         "final engine (stock + its landed --weight-format)")
    ap.add_argument("--batch", default=None,
                    help="requests R, or a comma list (one report each; with --measure one "
                         "engine serves them all); default 1, or the setting's concurrency")
    ap.add_argument("--context", type=int, default=256, help="tokens in each request's KV")
    ap.add_argument("--block", type=int, default=None,
                    help="verify rows B per request (default: the drafter's own)")
    ap.add_argument("--accept", type=float, default=None,
                    help="tau: tokens per verify step incl. the bonus (simulated when measuring); "
                         "default: measured with --measure, else B (every draft accepted)")
    ap.add_argument("--bw", type=float, default=None,
                    help=f"HBM bytes/s (default: the setting's GPU's nominal, else the H200's "
                         f"{H200_HBM_BW:g}; --measure: measured)")
    ap.add_argument("--flops", type=float, default=None,
                    help=f"matrix FLOP/s (default: the setting's GPU's nominal, else the H200's "
                         f"{H200_BF16_FLOPS:g}; --measure: measured)")
    ap.add_argument("--dtype-bytes", type=int, default=2)
    ap.add_argument("--weight-format", choices=("auto", "w12"), default=None,
                    help="w12: every linear layer (target and drafter) as lossless 12-bit "
                         "weights, as the server's --weight-format w12 (floors at 1.5 B per "
                         "weight; with --measure the engine converts its random bf16 weights at "
                         "load)")
    ap.add_argument("--measure", action="store_true", help="time the components on the GPU")
    ap.add_argument("--no-kernel-profile", dest="kernel_profile", action="store_false",
                    help="in-graph times from the corrected timing spans, not the kernel "
                    "profile (and no host-phase profile)")
    ap.add_argument("--steps", type=int, default=8, help="timed decode steps per pass (--measure)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed decode steps first (--measure)")
    ap.add_argument("--json", default=None, help="also write the report as JSON here")
    a = ap.parse_args(argv)
    if a.batch is not None:
        try:
            a.batch = [int(x) for x in str(a.batch).split(",")]
        except ValueError:
            ap.error(f"--batch {a.batch!r}: give an integer or a comma list of integers")
        if min(a.batch) < 1:
            ap.error("--batch: every batch size must be >= 1")
    if a.context < 0:
        ap.error("--context must be >= 0")
    if a.block is not None and a.block < 2:
        ap.error("--block: the verify rows B must be >= 2 (the engine refuses fewer)")
    if a.accept is not None and a.accept < 1:
        ap.error("--accept: tau counts the bonus token, so it is >= 1")
    for flag, v in (("--bw", a.bw), ("--flops", a.flops), ("--dtype-bytes", a.dtype_bytes)):
        if v is not None and v <= 0:
            ap.error(f"{flag} must be > 0")
    if a.json and not Path(a.json).expanduser().resolve().parent.is_dir():
        ap.error(f"--json {a.json}: its folder does not exist")
    if a.drafter and a.setting:
        ap.error("--drafter goes with --target; a setting names its own drafter")
    if a.engine == "stock" and not (a.drafter or a.setting):
        ap.error("--engine stock needs --drafter (or --setting)")
    if a.engine == "final" and not a.setting:
        ap.error("--engine final takes final's flags from a setting: give --setting")
    return a


def run(a: argparse.Namespace) -> list[dict]:
    """One report per batch size of --batch."""
    from specpilot.costmodel.counts import NOMINAL_RATES, Rates, Step, TargetShape
    from specpilot.costmodel.report import build_report
    from specpilot.spec.draft_config import DraftConfig

    target, drafter, block, batches = a.target, a.drafter, a.block, a.batch
    nominal, nominal_source = Rates(), "nominal H200"
    if a.setting:
        target, drafter, set_block, conc, set_wf, gpu = from_setting(a.setting, a.engine)
        if gpu in NOMINAL_RATES:   # the setting's card (a cpu setting keeps the H200's)
            label, bw, flops = NOMINAL_RATES[gpu]
            nominal, nominal_source = Rates(bw, flops), f"nominal {label}"
        else:
            nominal_source = f"nominal H200 (no nominal rates for gpu {gpu})"
        block, batches = block or set_block, batches or [conc]
        if a.engine == "final" and a.weight_format not in (None, set_wf):
            raise CostModelError(f"--weight-format {a.weight_format}: final of {a.setting} runs "
                                 f"--weight-format {set_wf}; drop the flag, or use --engine stock")
        a.weight_format = a.weight_format or set_wf
    a.weight_format = a.weight_format or "auto"
    if a.engine == "ar":
        drafter = None
    batches = batches or [1]
    tdir = config_dir(target, "target")
    ddir = config_dir(drafter, "drafter") if drafter else None
    shape = TargetShape.from_config(json.loads((tdir / "config.json").read_text()))
    dc = DraftConfig.from_path(str(ddir), shape.num_layers, shape.vocab) if ddir else None
    if dc is not None and dc.hf.hidden_size != shape.hidden:
        raise CostModelError(f"drafter hidden_size {dc.hf.hidden_size} differs from the target's "
                             f"{shape.hidden}; the engine refuses this pair")
    engine, reports = None, []
    wf = "w12" if a.weight_format == "w12" else "bf16"
    for batch in batches:
        planned = Step.for_engine(dc, batch, a.context, block, a.accept, a.dtype_bytes, wf)
        profile, rates_source = None, nominal_source
        rates = nominal
        if a.measure:
            if engine is None:
                engine = build_measured(a, tdir, ddir, max(batches), planned)
            profile = measure(a, engine, batch)
            rates, rates_source = profile.rates, f"measured on {profile.device}"
        rates = Rates(a.bw if a.bw is not None else rates.bw,
                      a.flops if a.flops is not None else rates.flops)
        if a.bw or a.flops:
            rates_source += ", overridden by --bw/--flops"
        accepted, source = a.accept, "given"
        if dc is None:
            accepted, source = 1.0, "ar"
        elif accepted is None and profile is not None:
            accepted, source = profile.spec.accepted, "measured, random drafter"
        elif accepted is None:
            source = "not given: every draft accepted, an upper bound"
        step = Step.for_engine(dc, batch, a.context, block, accepted, a.dtype_bytes, wf)
        if not 1 <= step.accepted <= step.rows:
            raise CostModelError(f"--accept {step.accepted:g}: tau must lie in [1, B = "
                                 f"{step.rows:g}] (B verify rows emit at most B tokens)")
        reports.append(build_report(shape, dc, step, rates, profile, (tdir.name, ddir and ddir.name),
                                    source, rates_source))
        if a.engine == "final":
            reports[-1]["engine"] = "final"
    return reports


def build_measured(a: argparse.Namespace, tdir: Path, ddir: Optional[Path], max_batch: int,
                   step):
    """(engine with random weights and CUDA graphs up to max_batch, measured rates)."""
    import torch

    from specpilot.costmodel import profile as prof

    if not torch.cuda.is_available():
        raise CostModelError("--measure needs a CUDA GPU (torch sees none); drop it for the "
                             "analytic floors")
    new_tokens = (a.steps + a.warmup + 4) * int(step.rows)
    rates = prof.measure_rates("cuda")
    eng = prof.build_engine(str(tdir), ddir and str(ddir), max_batch, a.context,
                            int(step.rows) if ddir else None, a.accept, new_tokens,
                            weight_format=a.weight_format)
    return eng, rates


def measure(a: argparse.Namespace, engine, batch: int):
    from specpilot.costmodel import profile as prof

    eng, rates = engine
    return prof.profile_engine(eng, batch, a.context, a.steps, a.warmup, rates,
                               kernels=a.kernel_profile)


def main(argv: Optional[list[str]] = None) -> int:
    from specpilot.costmodel.report import render

    a = parse_args(argv)
    try:
        reps = run(a)
    except (ValueError, FileNotFoundError) as e:  # CostModelError, config errors
        print(f"python -m specpilot.costmodel: error: {e}", file=sys.stderr)
        return 2
    print("\n\n".join(render(rep) for rep in reps))
    if a.json:  # one report: the object; several: a list, in --batch order
        Path(a.json).write_text(json.dumps(reps[0] if len(reps) == 1 else reps, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
