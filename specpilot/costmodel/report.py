"""The gap-to-ceiling report of shared/reference/verify_batching.md section 4.3.

Per component c of one step: floor t*_c = max(bytes_c / BW, FLOPs_c / F) (counts.py), measured
t_c (profile.py, GPU), efficiency t*_c / t_c, and the gap, in ms per generated token (the step
makes R x tau tokens):
  measured: excess = (t_c - t*_c) / (R tau); the host gap (wall - sum of t_c, clamped at 0 with
      a note; the wall under the overlap scheduler where that was timed, since the engines serve
      with it) has no floor, all of it is excess; inside CUDA graphs t_c is corrected for the
      cost of its timing spans (profile.correct_graph_pass);
  analytic only: rejected-row work = (t*_c - t*_c at rows = tau) / (R tau), what verifying the
      rows that end up rejected costs (the oracle-truncation gap).
Rows are sorted largest gap first (gaps under 5 us per token count as none; ties: largest
floor). Speedup ceiling = tau x T_ar / T_spec from the floors (sum of the component floors: the
kernels run one after another), from the floors with oracle truncation, and from the measured
steps (eager, and with CUDA graphs where both engines have them).

build_report(...) returns a JSON-ready dict; render(report) the text.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Optional

from specpilot.costmodel.counts import (W12_BYTES, Rates, Step, TargetShape, oracle_step,
                                        step_costs, total)
from specpilot.costmodel.profile import IN_GRAPH, UNATTRIBUTED, Profile, StepProfile

HOST_GAP = "host gap"
MIN_GAP = 5e-3  # ms per generated token: smaller gaps sort as none (then by floor)
# Per span, instrumented graph time left unexplained by the calibrated node overhead above which
# the report warns that in-graph component times overstate (H200, run 13: 13-19 us per span).
RESIDUAL_WARN_MS = 1e-3


def _floor_ms(costs, rates: Rates) -> float:
    return 1e3 * sum(c.floor_s(rates) for c in costs)


def _components(costs, oracle, rates: Rates, tokens: float, measured: Optional[dict]) -> list:
    ideal = {c.name: c.floor_s(rates) for c in oracle}
    rows = []
    for c in costs:
        floor = 1e3 * c.floor_s(rates)
        rows.append(dict(name=c.name, bytes=c.bytes, flops=c.flops, weight_bytes=c.weight_bytes,
                         floor_ms=floor, bound=c.bound(rates),
                         rejected_ms_per_token=(floor - 1e3 * ideal[c.name]) / tokens))
    if measured is not None:
        for name in measured.keys() - {r["name"] for r in rows}:  # timed, never counted
            rows.append(dict(name=name, bytes=0.0, flops=0.0, weight_bytes=0.0, floor_ms=0.0,
                             bound="-", rejected_ms_per_token=0.0))
        for r in rows:
            t = measured.get(r["name"])
            r["measured_ms"] = t
            r["efficiency"] = r["floor_ms"] / t if t else None
            r["excess_ms_per_token"] = None if t is None else (t - r["floor_ms"]) / tokens
    return rows


def residual_span_ms(p: StepProfile) -> Optional[float]:
    """Per span, what the instrumented graph step still costs beyond the plain one once the
    calibrated node overhead is removed (None without a calibration): 0 if the correction's
    fixed-cost assumption held."""
    if p.event_nodes_ms is None or not p.graph_spans or p.graph_instrumented_ms is None:
        return None
    spans = sum(p.graph_spans.values())
    return (p.graph_instrumented_ms - p.event_nodes_ms - p.graph_ms) / spans if spans else None


def _measured(p: StepProfile) -> dict:
    """The JSON of one engine's profile: its fields (raw and corrected graph-pass times, spans
    per step, calibration) and the derived host gaps, spans and event-node wall."""
    return dict(asdict(p), eager_host_gap_ms=p.eager_host_gap_ms,
                graph_host_gap_ms=p.graph_host_gap_ms,
                overlap_host_gap_ms=p.overlap_host_gap_ms, host_gap_ms=p.host_gap_ms,
                graph_spans_per_step=None if p.graph_spans is None else sum(p.graph_spans.values()),
                event_nodes_ms=p.event_nodes_ms, residual_span_ms=residual_span_ms(p))


def _notes(label: str, p: StepProfile) -> list[str]:
    """What the report printed clamped at 0 for engine `label`, with the value it replaced."""
    notes = [f"measured {label}: {n}" for n in p.notes]
    for where, gap in (("eager", p.eager_host_gap_ms), ("CUDA-graph", p.graph_host_gap_ms)):
        if gap is not None and gap < 0:
            notes.append(f"measured {label}: {where} host gap {gap:.3f} ms (wall - components), "
                         f"printed as 0")
    return notes


def build_report(target: TargetShape, drafter, step: Step, rates: Rates,
                 profile: Optional[Profile] = None, names: tuple = ("target", None),
                 accepted_source: str = "given", rates_source: str = "nominal") -> dict:
    """Everything the text and the JSON show. drafter: a DraftConfig or None (ar); profile: the
    measured steps (GPU) or None; names: (target, drafter) as given on the command line."""
    costs = step_costs(target, drafter, step)
    oracle = step_costs(target, drafter, oracle_step(step))
    ar = step_costs(target, None, Step(step.batch, step.context, dtype_bytes=step.dtype_bytes,
                                       weight_format=step.weight_format))
    main = None if profile is None else (profile.spec if drafter is not None else profile.ar)
    tokens = step.tokens
    rows = _components(costs, oracle, rates, tokens, None if main is None else main.measured_ms)
    if main is not None:
        gap = main.host_gap_ms
        rows.append(dict(name=HOST_GAP, bytes=0.0, flops=0.0, weight_bytes=0.0, floor_ms=0.0,
                         bound="-", rejected_ms_per_token=0.0, measured_ms=gap, efficiency=None,
                         excess_ms_per_token=gap / tokens))
    key = "rejected_ms_per_token" if main is None else "excess_ms_per_token"
    rows.sort(key=lambda r: (float("-inf") if r[key] is None else
                             r[key] if r[key] >= MIN_GAP else 0.0, r["floor_ms"]), reverse=True)

    whole = total(costs)
    floor, ar_floor, oracle_floor = (_floor_ms(x, rates) for x in (costs, ar, oracle))
    rep = dict(
        target=names[0], drafter=names[1], engine="ar" if drafter is None else "stock",
        algorithm=None if drafter is None else drafter.algorithm,
        step=dict(asdict(step), accepted_source=accepted_source),
        rates=dict(bw=rates.bw, flops=rates.flops, source=rates_source),
        components=rows, gap_key=key, largest_gaps=[r["name"] for r in rows[:3]],
        totals=dict(floor_ms=floor, roofline_ms=1e3 * whole.floor_s(rates), bytes=whole.bytes,
                    flops=whole.flops, weight_bytes=whole.weight_bytes, ar_floor_ms=ar_floor,
                    oracle_floor_ms=oracle_floor, tokens_per_step=tokens),
        verify=dict(rows_per_step=step.batch * step.rows, accepted_plus_one=tokens,
                    efficiency=tokens / (step.batch * step.rows)),
        ceiling=None, measured=None, notes=[])
    if drafter is not None:
        rep["ceiling"] = dict(floors=step.accepted * ar_floor / floor,
                              oracle=step.accepted * ar_floor / oracle_floor)
    if profile is not None:
        rep["measured"] = dict(device=profile.device, steps=profile.steps,
                               ar=_measured(profile.ar),
                               spec=None if profile.spec is None else _measured(profile.spec))
        rep["notes"] += _notes("ar", profile.ar)
        if profile.spec is not None:
            rep["notes"] += _notes("stock", profile.spec)
            a, s = profile.ar, profile.spec
            rep["ceiling"]["measured_eager"] = s.accepted * a.eager_ms / s.eager_ms
            if a.graph_ms and s.graph_ms:
                rep["ceiling"]["measured_graphs"] = s.accepted * a.graph_ms / s.graph_ms
    return rep


def _ms(x: Optional[float], digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def render(rep: dict) -> str:
    s, t, measured = rep["step"], rep["totals"], rep["measured"]
    who = rep["target"] + (f" + {rep['drafter']} ({rep['algorithm']})" if rep["drafter"] else "")
    lines = [f"cost model: {who}, engine {rep['engine']}",
             f"step: R={s['batch']} requests, context L={s['context']}, verify rows B={s['rows']:g}"
             + (f", draft block Bd={s['draft_rows']}" if s["draft_rows"] else "")
             + f", tau={s['accepted']:.2f} tokens/request/step ({s['accepted_source']}), "
             f"{s['dtype_bytes']} B/element"
             + (f", linear weights W12 ({W12_BYTES:g} B/element)"
                if s.get("weight_format") == "w12" else ""),
             f"rates: HBM {rep['rates']['bw'] / 1e12:.2f} TB/s, matrix "
             f"{rep['rates']['flops'] / 1e12:.0f} TFLOP/s ({rep['rates']['source']})"]
    main = None if measured is None else (measured["spec"] or measured["ar"])
    if measured is None:
        lines.append("analytic floors only: the measured columns need a GPU "
                     "(run the same command with --measure on one)")
    else:
        cal, ks = main["span_calibration"], main.get("kernel_stats")
        wall = ("overlapped graph wall (the overlap scheduler, as the engines serve)"
                if main.get("overlap_host_gap_ms") is not None else "graph wall")
        spans = ("leaf spans as event nodes, CORRECTED: each less its spans x the span overhead"
                 if cal else "leaf spans on the eager twins, not captured: uncorrected")
        if ks:
            where = ("inside the CUDA graphs from a kernel profile of their replays (each kernel "
                     "charged to the component that launched it in an eager run of the same "
                     "code; other = kernels outside every component), outside them with CUDA "
                     f"events; host gap = {wall} - sum")
        elif main.get("graph_components_ms"):
            where = (f"with CUDA events inside the CUDA graphs ({spans}; other = the graphs' GPU "
                     f"time - their leaves); host gap = {wall} - sum")
        else:
            where = "with CUDA events on the eager path; host gap = eager wall - sum"
        lines.append(f"measured on {measured['device']}: {measured['steps']} steps per pass, "
                     f"random weights, components timed {where}")
        for label, p in (("stock", measured["spec"]), ("ar", measured["ar"])):
            k = None if p is None else p.get("kernel_stats")
            if k:
                lines.append(f"kernel profile ({label}): {k['kernels_per_replay']:g} kernels per "
                             f"step, {k['matched_per_replay']:g} matched by name and "
                             f"{k['position_matched_per_replay']:g} by position to the "
                             f"eager run's {k['eager_kernels']:g}; unattributed "
                             f"{k['unattributed_ms']:.3f} ms")
                odd = (("matched by position", k["by_position"].items()),
                       ("unattributed", [(name, ms) for name, (ms, _) in
                                         k["top_kernels"].get(UNATTRIBUTED, {}).items()]))
                for what, kernels in odd:
                    if kernels:
                        lines.append(f"  {what}: " + ", ".join(
                            f"{name[:60]} {ms * 1e3:.1f} us" for name, ms in kernels))
            ph = None if p is None else p.get("host_phases_ms")
            if ph:
                host = sorted(((phase, ms) for phase, ms in ph.items() if phase != IN_GRAPH),
                              key=lambda kv: -kv[1])
                lines.append(
                    f"host phases ({label}): GPU idle per step while the host ran "
                    + ", ".join(f"{phase} {ms:.3f}" for phase, ms in host)
                    + f" ms; idle inside graphs "
                    f"{ph.get(IN_GRAPH, 0.0):.3f} ms (under the profiler: wall "
                    f"{p['host_phase_wall_ms']:.2f} ms against {p['graph_ms']:.2f} without)")
        if cal and not ks:
            per_step = ", ".join(f"{label} {p['graph_spans_per_step']:g}" for label, p in
                                 (("stock", measured["spec"]), ("ar", measured["ar"]))
                                 if p is not None and p["graph_spans_per_step"] is not None)
            lines.append(f"span calibration ({cal['spans']} spans around a 1-element add in a "
                         f"captured graph): span overhead {cal['span_overhead_ms'] * 1e3:.2f} us, "
                         f"node overhead {cal['node_overhead_ms'] * 1e3:.2f} us per span, add "
                         f"{cal['kernel_ms'] * 1e3:.2f} us; spans per step in the graphs: "
                         f"{per_step}")
            res = main.get("residual_span_ms")
            if res is not None:
                lines.append(f"left after the correction: the instrumented graph step runs "
                             f"{res * 1e3:.1f} us per span slower than the plain one beyond the "
                             f"node overhead (0 = the correction holds)")
            if res is not None and res > RESIDUAL_WARN_MS:
                lines.append(f"WARNING: in-graph component times overstate by up to "
                             f"{res * main['graph_spans_per_step']:.2f} ms per step in all; on "
                             "the H200 the excess sat on short non-GEMM spans (GDN conv, "
                             "recurrence, norms), not on the GEMMs: check the top gaps with a "
                             "kernel profiler")
    gap_name = "excess" if rep["gap_key"] == "excess_ms_per_token" else "rejected-row work"
    lines += ["", f"{'component':20} {'meas ms':>9} {'floor ms':>9} {'bound':>7} "
              f"{'floor/meas':>10} {'excess ms/tok':>14} {'rejected ms/tok':>16}"]
    for r in rep["components"]:
        eff = r.get("efficiency")
        lines.append(f"{r['name']:20} {_ms(r.get('measured_ms')):>9} {_ms(r['floor_ms']):>9} "
                     f"{r['bound']:>7} {'-' if eff is None else f'{eff:.0%}':>10} "
                     f"{_ms(r.get('excess_ms_per_token'), 4):>14} "
                     f"{_ms(r['rejected_ms_per_token'], 4):>16}")
    meas_sum = None if measured is None else sum(r["measured_ms"] or 0 for r in rep["components"])
    lines.append(f"{'step (sum)':20} {_ms(meas_sum):>9} {_ms(t['floor_ms']):>9}")
    lines += ["", f"three largest gaps ({gap_name}; then largest floor):"]
    by_name = {r["name"]: r for r in rep["components"]}
    tops = ((main or {}).get("kernel_stats") or {}).get("top_kernels", {})
    for i, name in enumerate(rep["largest_gaps"], 1):
        r = by_name[name]
        lines.append(f"  {i}. {name}: {r[rep['gap_key']]:.4f} ms per generated token "
                     f"(floor {r['floor_ms']:.3f} ms per step)")
        if name in tops:  # where the component's in-graph time goes (kernel profile)
            lines.append("     kernels: " + ", ".join(
                f"{k[:48]} {ms:.3f} ms ({count:g}x)"
                for k, (ms, count) in list(tops[name].items())[:3]))
    v = rep["verify"]
    lines += ["", f"verified rows {v['rows_per_step']:g} per step vs accepted+1 "
              f"{v['accepted_plus_one']:.2f}: speculation efficiency {v['efficiency']:.0%}",
              f"floors: step {t['floor_ms']:.3f} ms (sum of components; whole-step roofline "
              f"{t['roofline_ms']:.3f} ms; {t['weight_bytes'] / 1e9:.2f} GB weights, "
              f"{t['bytes'] / 1e9:.2f} GB moved, {t['flops'] / 1e12:.3f} TFLOP), ar step "
              f"{t['ar_floor_ms']:.3f} ms, oracle truncation {t['oracle_floor_ms']:.3f} ms"]
    c = rep["ceiling"]
    if c is not None:
        line = (f"speedup ceiling at tau={s['accepted']:.2f}: {c['floors']:.2f}x from floors, "
                f"{c['oracle']:.2f}x with oracle truncation")
        if "measured_eager" in c:
            line += f"; measured {c['measured_eager']:.2f}x eager"
        if "measured_graphs" in c:
            line += f", {c['measured_graphs']:.2f}x with CUDA graphs"
        lines.append(line)
    else:
        lines.append(f"ceiling: {s['batch'] * 1e3 / t['floor_ms']:.1f} tokens/s at the floor")
    if measured is not None:
        for label, p in (("ar", measured["ar"]), ("stock", measured["spec"])):
            if p is None:
                continue
            line = (f"measured {label}: wall {p['eager_ms']:.2f} ms eager (instrumented "
                    f"{p['instrumented_ms']:.2f}, host gap {max(0.0, p['eager_host_gap_ms']):.2f})")
            if p["graph_ms"] is not None:
                line += f", {p['graph_ms']:.2f} ms with CUDA graphs"
            if p.get("overlap_ms") is not None:
                line += f" ({p['overlap_ms']:.2f} overlapped)"
            if p.get("graph_components_ms"):
                line += f" (instrumented {p['graph_instrumented_ms']:.2f}"
                if p["event_nodes_ms"] is not None:
                    line += (f", {p['graph_instrumented_ms'] - p['event_nodes_ms']:.2f} less "
                             f"{p['graph_spans_per_step']:g} spans x node overhead")
                line += f", host gap {max(0.0, p['graph_host_gap_ms']):.2f}"
                if p.get("overlap_host_gap_ms") is not None:
                    line += f"; overlapped {max(0.0, p['overlap_host_gap_ms']):.2f}"
                line += ")"
            lines.append(line + f", tau {p['accepted']:.2f}")
    lines += [f"note: {n}" for n in rep["notes"]]
    return "\n".join(lines)
