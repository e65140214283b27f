"""Measured side of the cost model: per-component device time of real decode steps.

How: the engine is instrumented from the outside (no engine change). Module forward pre/post
hooks and timed wrappers around a few callables open and close labelled spans; each span puts a
clock mark (a CUDA event on the GPU, perf_counter on the CPU, where kernels run synchronously)
at its start and end. Spans nest (a Gated DeltaNet layer contains its projections): a label is
charged its exclusive time, the span minus its child spans, so the labels add up to the time the
top-level spans cover. Labels equal counts.py's component names.

Steps come from the scheduler, as scripts/gpu_real_shapes.py times them: R requests of `context`
random prompt tokens are prefilled, a few warm-up steps run, then N steps are timed one by one
(device synchronised around each). Per engine up to four passes:
  1. with CUDA graphs (when the engine has them): the wall, and the GPU time inside the graphs
     (events around each replay, outside the graph);
  2. graphs, instrumented with leaf spans only (no span contains another): the bucket's graph
     is captured once more with the spans inside it (CUDA events recorded as graph nodes,
     `external=True`), swapped in for the pass and swapped back after; every replay re-records
     the same events, so a leaf's time is GPU time inside the graph without launch gaps. Each
     span also carries a roughly fixed cost of its event nodes and dependency edges (an H200
     run: 48 GDN kernels of ~10 us timed 5x their profiler total, the big GEMMs within a few %),
     so on the GPU calibrate_spans() measures it on a graph of tiny spans and every label's
     in-graph time is taken less (its spans per step) x the span overhead (correct_graph_pass).
     "other" is not taken from the gaps: it is pass 1's in-graph GPU time (no events in that
     graph) minus the corrected leaves inside the graph (norms, RoPE, embedding, residual and
     gate arithmetic, copies). A Gated DeltaNet layer's conv, recurrence and output norm are
     its leaves for "gdn.recurrent". host gap = pass-1 wall - the components (sampling,
     scheduling, input copies and anything else outside the graphs);
  3. eager, graphs off: the wall;
  4. eager, instrumented: component times of the eager path (host gap = pass-3 wall - their sum).
  5. kernels (CUDA graphs captured, `kernels=True`): the in-graph times from torch.profiler
     instead of from spans, so nothing is added to the graph. Each bucket graph is replayed a
     few times under the profiler (its kernels and their GPU times, per replay), then its
     captured forward runs once eagerly, as at capture (`_prepare(bs, [], [])`, `_forward(bs)`;
     inside `layers.linear.graph_twin()`, so that a bf16 model's one-row linear layers launch
     the GEMV they run in the graph, not the cuBLAS kernels of their eager path), under the
     profiler with every label as a `record_function` range. Each kernel of that run
     gets the innermost label around the host call that launched it (launch_labels); the
     replay's kernels are matched to them in order (attribute_kernels: difflib over the kernel
     names, since a replay runs the kernels captured from that very code; where one stretch
     differs, e.g. another GEMM variant under capture, by position). Kernels no label covers
     are "other"; replayed kernels with no match in the eager run are "unattributed"
     (reported with their names, never spread over the labels). When the pass runs, the report
     uses it for the in-graph times (labels outside the graphs keep pass 2's times) and keeps
     pass 2's span-corrected figures in the JSON beside it.
  6. host phases (with pass 5): the graph steps again under torch.profiler, CPU and CUDA, with
     the host's phases of a step as ranges (phase_wraps: schedule, worker batch, graph inputs,
     graph launch, sampling and its copy, processing results). Every stretch in which the GPU
     runs nothing is charged to the innermost phase open on the host meanwhile (idle_by_phase),
     so the host gap splits into where the host spends it; idle between the kernels of one
     graph replay is reported apart. The profiler slows the host, so the phases are read
     against that pass's own wall, printed beside pass 1's.
  7. overlapped (graphs, where the worker can launch a step without reading it): the steps
     under the overlap scheduler, as every engine runs by default (no
     --disable-overlap-schedule); ms per launched step over a run (overlapped_steps).
Graphs are switched off by setting the engine's graph attributes to None and restored after.
Without graphs passes 1-2 are skipped; on the CPU the graph objects run their eager twins and
passes 1-2 time the same code with the host clock.

Limits: in the eager passes a CUDA event pair also counts the time the GPU waits for the host to
launch the kernels inside it, so when the host is the bottleneck component times absorb some of
the host gap; the graph passes do not have that problem. The span correction assumes every span
costs what a span around one tiny kernel costs; pass 2's wall, slowed by its event nodes, is
reported beside pass 1's and beside itself less (spans per step) x the calibrated node overhead,
which shows how well that holds.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

import torch
from torch import nn

from specpilot.costmodel.counts import Rates
from specpilot.kernels import pdl
from specpilot.layers import linear

Label = Union[str, Callable[[tuple, dict], str]]
log = logging.getLogger(__name__)


class HostClock:
    """CPU: work is synchronous, so a perf_counter mark is the time everything before it ended."""

    def mark(self) -> float:
        return time.perf_counter()

    def ms(self, a: float, b: float) -> float:
        return (b - a) * 1e3

    def sync(self) -> None:
        pass


class CudaClock:
    """GPU: a timing event recorded on the current stream (external: under CUDA-graph capture it
    becomes an event-record node of the graph, re-recorded at every replay)."""

    def mark(self) -> torch.cuda.Event:
        e = torch.cuda.Event(enable_timing=True, external=True)
        e.record()
        return e

    def ms(self, a: torch.cuda.Event, b: torch.cuda.Event) -> float:
        return a.elapsed_time(b)

    def sync(self) -> None:
        torch.cuda.synchronize()


def clock_for(device: torch.device) -> Union[HostClock, CudaClock]:
    return CudaClock() if torch.device(device).type == "cuda" else HostClock()


class ComponentTimer:
    """Exclusive time and number of spans per label over nested spans, summed over steps (the
    counts size the span-overhead correction of the graph pass). Spans are recorded only while
    `active`; toggle it between steps, never inside one."""

    def __init__(self, clock):
        self.clock = clock
        self.active = False
        self.steps = 0
        self.totals: dict[str, float] = defaultdict(float)
        self.graph_totals: dict[str, float] = defaultdict(float)  # spans begun in a graph
        self.counts: dict[str, int] = defaultdict(int)
        self.graph_counts: dict[str, int] = defaultdict(int)
        self.in_graph = False  # set while a graph replays its eager twin or is captured
        # [label, start mark, end mark, child span indices, begun in a graph]
        self._spans: list[list] = []
        self._open: list[int] = []
        self._fixed = 0  # spans recorded inside a captured graph: kept, re-read every step

    def begin(self, label: str) -> None:
        if not self.active:
            return
        if self._open:
            self._spans[self._open[-1]][3].append(len(self._spans))
        self._open.append(len(self._spans))
        self._spans.append([label, self.clock.mark(), None, [], self.in_graph])

    def end(self) -> None:
        if self.active:
            self._spans[self._open.pop()][2] = self.clock.mark()

    def freeze(self) -> None:
        """The spans recorded so far were captured into a CUDA graph: keep them across steps
        (each replay re-records their events)."""
        self._fixed = len(self._spans)

    def end_step(self) -> None:
        """Call after the step: waits for the device, then charges every span its exclusive ms."""
        self.clock.sync()
        incl = [self.clock.ms(a, b) for _, a, b, _, _ in self._spans]
        for (label, _, _, children, in_graph), t in zip(self._spans, incl):
            self.totals[label] += t - sum(incl[c] for c in children)
            self.counts[label] += 1
            if in_graph:
                self.graph_totals[label] += t - sum(incl[c] for c in children)
                self.graph_counts[label] += 1
        del self._spans[self._fixed:]
        self.steps += 1

    def mean_ms(self, graph_only: bool = False) -> dict[str, float]:
        """Mean exclusive ms per step per label (graph_only: of the spans begun in a graph)."""
        totals = self.graph_totals if graph_only else self.totals
        return {k: v / max(self.steps, 1) for k, v in totals.items()}

    def mean_spans(self, graph_only: bool = False) -> dict[str, float]:
        """Mean number of spans per step per label (graph_only: of the spans begun in a graph)."""
        counts = self.graph_counts if graph_only else self.counts
        return {k: v / max(self.steps, 1) for k, v in counts.items()}

    @contextlib.contextmanager
    def graph_scope(self, graphs: list):
        """Spans begun while one of `graphs` replays (runs its eager twin, on the CPU) count
        as inside the graph."""
        def scoped(launch):
            def run(bs):
                self.in_graph = True
                try:
                    return launch(bs)
                finally:
                    self.in_graph = False
            return run

        for g in graphs:
            g._launch = scoped(g._launch)
        try:
            yield
        finally:
            for g in graphs:
                del g._launch

    def hook(self, module: nn.Module, label: str) -> list:
        """Span `label` around every forward of `module`; returns the hook handles."""
        return [module.register_forward_pre_hook(lambda m, a: self.begin(label)),
                module.register_forward_hook(lambda m, a, o: self.end())]

    @contextlib.contextmanager
    def wrap(self, obj, attr: str, label: Label):
        """Replace obj.attr (a method, an instance attribute or a module function) by a timed
        wrapper for the duration of the block; label may depend on the call's (args, kwargs)."""
        orig = getattr(obj, attr)
        own = attr in vars(obj)

        def timed(*args, **kwargs):
            self.begin(label(args, kwargs) if callable(label) else label)
            try:
                return orig(*args, **kwargs)
            finally:
                self.end()

        setattr(obj, attr, timed)
        try:
            yield
        finally:
            if own:
                setattr(obj, attr, orig)
            else:
                delattr(obj, attr)


LABEL_PREFIX = "costmodel:"  # record_function names of pass 5's labels
PHASE_PREFIX = "hostphase:"  # and of pass 6's host phases
TOP_KERNELS = 12  # kernel names kept per label in the stats (the report prints 3)
OTHER, UNATTRIBUTED = "other", "unattributed"
IN_GRAPH, NO_PHASE = "idle inside graphs", "outside every phase"


class KernelLabels(ComponentTimer):
    """Pass 5's stand-in for ComponentTimer: the same hooks and wrappers (instrument()), but a
    label is a torch.profiler range (record_function named LABEL_PREFIX + label), not a clock
    mark, so the kernels launched inside it can be told apart in a profile."""

    def __init__(self, prefix: str = LABEL_PREFIX):
        super().__init__(HostClock())
        self.prefix = prefix
        self._ranges: list = []

    def begin(self, label: str) -> None:
        if self.active:
            rf = torch.autograd.profiler.record_function(self.prefix + label)
            rf.__enter__()
            self._ranges.append(rf)

    def end(self) -> None:
        if self.active:
            self._ranges.pop().__exit__(None, None, None)


def _is_device(e) -> bool:
    return getattr(e.device_type, "name", str(e.device_type)).upper() == "CUDA"


def launch_labels(events) -> list[tuple[str, str]]:
    """(kernel name, label) of every device activity (kernels, copies, memsets) in a profiled
    eager run, in GPU start order. A kernel's label is the innermost LABEL_PREFIX range, on the
    launching thread, around the host call that launched it: the runtime call (a `cu*` event)
    with the kernel's correlation id, else the op the kernel is linked to; OTHER when no range
    covers it. `events`: torch.profiler's FunctionEvents (or objects with name, id,
    linked_correlation_id, device_type, thread, time_range.start/.end)."""
    ranges, runtime, ops = [], {}, {}
    for e in events:
        if _is_device(e):
            continue
        if e.name.startswith("cu"):
            runtime[e.id] = e
            continue
        if e.name.startswith(LABEL_PREFIX):  # a range is an op too: a kernel may link to it
            ranges.append((e.time_range.start, e.time_range.end, e.thread,
                           e.name[len(LABEL_PREFIX):]))
        ops.setdefault(e.id, e)

    def label(host) -> str:
        t, best = host.time_range.start, None
        for a, b, th, name in ranges:
            if th == host.thread and a <= t <= b and (best is None or b - a < best[1] - best[0]):
                best = (a, b, name)
        return OTHER if best is None else best[2]

    out = []
    for k in sorted((e for e in events if _is_device(e)), key=lambda e: e.time_range.start):
        host = runtime.get(k.id) or ops.get(getattr(k, "linked_correlation_id", 0))
        out.append((k.name, OTHER if host is None else label(host)))
    return out


def replay_kernels(events, replays: int) -> list[list[tuple[str, float]]]:
    """Device activities of `replays` graph replays profiled back to back -> per replay, in GPU
    start order, (name, ms). A replay's kernels share the correlation id of its graph launch;
    when the ids do not split them into `replays` groups, equal consecutive chunks are used."""
    dev = sorted((e for e in events if _is_device(e)), key=lambda e: e.time_range.start)
    rows = [(e.name, (e.time_range.end - e.time_range.start) / 1e3, e.id) for e in dev]
    groups: dict[int, list] = {}
    for name, ms, cid in rows:
        groups.setdefault(cid, []).append((name, ms))
    if len(groups) == replays:
        return list(groups.values())
    if not rows or len(rows) % replays:
        raise ValueError(f"{len(rows)} device activities do not split into {replays} replays")
    n = len(rows) // replays
    return [[(name, ms) for name, ms, _ in rows[i * n:(i + 1) * n]] for i in range(replays)]


def attribute_kernels(labelled: list[tuple[str, str]], replays: list[list[tuple[str, float]]]
                      ) -> tuple[dict[str, float], dict]:
    """Mean ms per replay per label: each replayed kernel takes the label of the kernel it
    matches in the labelled eager run (difflib over the name sequences, per replay). Where the
    two runs differ at one place (a difflib "replace": e.g. cuBLAS picks another variant of a
    GEMM under capture), the replayed kernels take the eager kernels' labels by position when
    the two stretches are as long, or their one label when all of them share it; these count as
    matched by position. Anything else, and replayed kernels with no eager counterpart, count as
    UNATTRIBUTED. Returns (ms per label, stats: kernels per replay, matched per replay by name
    and by position, eager kernels, unattributed ms per replay, `by_position`: up to 5 kernel
    names matched by position with their ms per replay, and `top_kernels`: per label, UNATTRIBUTED
    included, its TOP_KERNELS costliest kernel names with ms and launches per replay; the report
    prints 3, the JSON keeps them all)."""
    import difflib

    names = [n for n, _ in labelled]
    totals: dict[str, float] = defaultdict(float)
    positional: dict[str, float] = defaultdict(float)  # kernel name -> ms
    matched, by_pos = [], []
    per_kernel: dict = defaultdict(lambda: defaultdict(lambda: [0.0, 0]))  # label -> name -> ms, n
    for rep in replays:
        sm = difflib.SequenceMatcher(None, names, [n for n, _ in rep], autojunk=False)
        lab, how = [UNATTRIBUTED] * len(rep), [UNATTRIBUTED] * len(rep)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            eager = [labelled[i][1] for i in range(i1, i2)]
            if tag == "equal":
                lab[j1:j2], how[j1:j2] = eager, [None] * (j2 - j1)
            elif tag == "replace" and (i2 - i1 == j2 - j1 or len(set(eager)) == 1):
                lab[j1:j2] = eager if i2 - i1 == j2 - j1 else eager[:1] * (j2 - j1)
                how[j1:j2] = ["by_position"] * (j2 - j1)
        for (name, ms), label, kind in zip(rep, lab, how):
            totals[label] += ms
            per_kernel[label][name][0] += ms
            per_kernel[label][name][1] += 1
            if kind == "by_position":
                positional[name] += ms
        matched.append(how.count(None))
        by_pos.append(how.count("by_position"))
    n = max(len(replays), 1)
    per = {k: v / n for k, v in totals.items()}
    stats = {"kernels_per_replay": statistics.mean(len(r) for r in replays) if replays else 0,
             "matched_per_replay": statistics.mean(matched) if matched else 0,
             "position_matched_per_replay": statistics.mean(by_pos) if by_pos else 0,
             "eager_kernels": len(labelled), "unattributed_ms": per.get(UNATTRIBUTED, 0.0)}
    top = sorted(positional.items(), key=lambda kv: -kv[1])[:5]
    stats["by_position"] = {name: ms / n for name, ms in top}
    stats["top_kernels"] = {
        label: {name: [ms / n, count / n] for name, (ms, count) in
                sorted(d.items(), key=lambda kv: -kv[1][0])[:TOP_KERNELS]}
        for label, d in per_kernel.items()}
    return per, stats


def kernel_pass(worker, graphs: list, batch: int, replays: int = 5
                ) -> tuple[dict[str, float], dict]:
    """Pass 5 (module docstring) over the bucket graphs of `batch`: (ms per step per label
    inside the graphs, stats summed over the graphs). Call after a step of `batch` requests
    filled the graphs' buffers; the buffers are left as a capture leaves them."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    inside: dict[str, float] = defaultdict(float)
    stats: dict = {}
    for g in graphs:
        bs = g.bucket(batch)
        if not g.captured or bs is None:
            continue
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                g.graphs[bs].replay()
            torch.cuda.synchronize()
        runs = replay_kernels(prof.events(), replays)
        labels = KernelLabels()
        with torch.inference_mode():
            g._prepare(bs, [], [])  # as before the capture; its own copies stay out of the trace
        torch.cuda.synchronize()
        with (torch.inference_mode(), instrument(labels, worker), linear.graph_twin(),
              profile(activities=acts) as prof):   # graph_twin: the captured kernels, eagerly
            labels.active = True
            g._forward(bs)
            labels.active = False
            torch.cuda.synchronize()
        per, st = attribute_kernels(launch_labels(prof.events()), runs)
        for k, v in per.items():
            inside[k] += v
        for k, v in st.items():
            if k == "top_kernels":  # per label, merged over the graphs (TOP_KERNELS kept)
                for label, kernels in v.items():
                    d = stats.setdefault(k, {}).setdefault(label, {})
                    for name, (ms, count) in kernels.items():
                        old_ms, old_n = d.get(name, (0.0, 0))
                        d[name] = [old_ms + ms, old_n + count]
                    stats[k][label] = dict(sorted(d.items(),
                                                  key=lambda kv: -kv[1][0])[:TOP_KERNELS])
            elif k == "by_position":  # kernel names: merged over the graphs
                d = stats.setdefault(k, {})
                for name, ms in v.items():
                    d[name] = d.get(name, 0.0) + ms
            else:
                stats[k] = stats.get(k, 0) + v
    return dict(inside), dict(stats)


def phase_wraps(sched, worker) -> list[tuple[object, str, str]]:
    """(owner, method, phase) of pass 6: the scheduler's parts of a decode step, the worker's
    forward, each graph object's run (filling its buffers) and launch, and ar's sampling (with
    the step's device-to-host copy); innermost wins."""
    runner = getattr(worker, "runner", worker)
    out = [(sched, "step", "scheduler step"), (sched, "_schedule_decode", "schedule"),
           (sched, "_worker_batch", "worker batch"), (sched, "_process", "process results"),
           (worker, "forward", "worker forward")]
    for g in step_graphs(worker):
        out += [(g, "run", "graph inputs"), (g, "_launch", "graph launch")]
    if runner is worker:
        out.append((runner, "_sample", "sample + copy"))
    return out


def idle_by_phase(events, steps: int) -> dict[str, float]:
    """GPU idle ms per step by what the host was doing meanwhile, from a profile of `steps`
    steps with PHASE_PREFIX ranges (the outermost named "scheduler step"): the window is from the
    first step's start to the last one's end; an idle stretch between two kernels of one graph
    replay (same correlation id) counts as IN_GRAPH, any other is split at the phase boundaries
    and charged to the innermost phase open on the host (NO_PHASE where none is)."""
    ranges, dev = [], []
    for e in events:
        if _is_device(e):
            dev.append((e.time_range.start, e.time_range.end, e.id))
        elif e.name.startswith(PHASE_PREFIX):
            ranges.append((e.time_range.start, e.time_range.end, e.name[len(PHASE_PREFIX):]))
    outer = [r for r in ranges if r[2] == "scheduler step"]
    if not outer:
        raise ValueError("no host phase ranges in the profile")
    lo, hi = min(r[0] for r in outer), max(r[1] for r in outer)
    gaps, t, last = [], lo, None
    for a, b, cid in sorted(d for d in dev if d[1] > lo and d[0] < hi):
        if a > t:
            gaps.append((t, a, last is not None and cid == last))
        if b > t:
            t, last = b, cid
    if hi > t:
        gaps.append((t, hi, False))
    out: dict[str, float] = defaultdict(float)
    for a, b, in_graph in gaps:
        if in_graph:
            out[IN_GRAPH] += b - a
            continue
        cuts = sorted({a, b} | {x for r in ranges for x in r[:2] if a < x < b})
        for x, y in zip(cuts, cuts[1:]):
            m, best = (x + y) / 2, None
            for r in ranges:
                if r[0] <= m <= r[1] and (best is None or r[1] - r[0] < best[1] - best[0]):
                    best = r
            out[NO_PHASE if best is None else best[2]] += y - x
    return {k: v / 1e3 / max(steps, 1) for k, v in out.items()}


def host_phase_pass(sched, worker, batch: int, context: int, steps: int, warmup: int,
                    clock) -> tuple[dict[str, float], float]:
    """Pass 6 (CUDA graphs on): `steps` decode steps under torch.profiler with the phases of
    phase_wraps as ranges -> (GPU idle ms per step by host phase, median profiled wall ms)."""
    from torch.profiler import ProfilerActivity, profile

    phases = KernelLabels(PHASE_PREFIX)
    with contextlib.ExitStack() as stack:
        for obj, attr, label in phase_wraps(sched, worker):
            stack.enter_context(phases.wrap(obj, attr, label))
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                         if torch.cuda.is_available() else [])
        with profile(activities=acts) as prof:
            wall, _ = timed_steps(sched, batch, context, steps, warmup, clock, phases)
    return idle_by_phase(prof.events(), steps), wall


def combine_kernel_pass(timer: ComponentTimer, inside: dict[str, float]) -> dict[str, float]:
    """Pass 2's labels outside the graphs (as timed) plus pass 5's times inside them."""
    raw_inside = timer.mean_ms(graph_only=True)
    comps = {label: t - raw_inside.get(label, 0.0) for label, t in timer.mean_ms().items()}
    for label, t in inside.items():
        comps[label] = comps.get(label, 0.0) + t
    return comps


def _attention_label(args: tuple, kwargs: dict) -> str:
    """backend.forward(q, k, v, layer_id, scale, window=None): sliding iff a window is given."""
    window = args[5] if len(args) > 5 else kwargs.get("window")
    return "attention[sliding]" if window else "attention[full]"


def _decoder_layers(model: nn.Module) -> nn.ModuleList:
    for name, mod in model.named_modules():
        if name.endswith("layers") and isinstance(mod, nn.ModuleList):
            return mod
    raise ValueError(f"{type(model).__name__} has no decoder `layers` list")


def target_hooks(timer: ComponentTimer, model: nn.Module, leaves: bool = False) -> list:
    """Hooks on the target's GEMM classes (per mixer kind), GDN layers and the whole forward.
    leaves: no span around the forward ("other" is then what the graph time leaves over) nor
    around a GDN layer (its output norm is hooked; the caller wraps the conv and recurrence)."""
    handles = [] if leaves else timer.hook(model, "other")  # embedding, norms, RoPE, residuals
    for layer in _decoder_layers(model):
        gdn = getattr(layer, "linear_attn", None)
        kind = "attn" if gdn is None else "gdn"
        if gdn is None:
            a = layer.self_attn
            for name in ("qkv_proj", "qkvg_proj", "q_proj", "k_proj", "v_proj", "gate_proj"):
                if hasattr(a, name):  # fused (layers/fused.py) or not
                    handles += timer.hook(getattr(a, name), "attn.qkv")
            handles += timer.hook(a.o_proj, "attn.o")
        else:
            # exclusive: conv, delta rule, output norm
            handles += timer.hook(gdn.norm if leaves else gdn, "gdn.recurrent")
            for name in ("in_proj", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"):
                if hasattr(gdn, name):
                    handles += timer.hook(getattr(gdn, name), "gdn.in_proj")
            handles += timer.hook(gdn.out_proj, "gdn.out_proj")
        for name in ("gate_up_proj", "gate_proj", "up_proj"):
            if hasattr(layer.mlp, name):
                handles += timer.hook(getattr(layer.mlp, name), f"{kind}.mlp.gate_up")
        handles += timer.hook(layer.mlp.down_proj, f"{kind}.mlp.down")
    return handles


def graph_objects(worker) -> list[tuple[object, str]]:
    """(owner, attribute) of every CUDA-graph object a step of `worker` may use."""
    if getattr(worker, "runner", worker) is worker:
        return [(worker, "graphs")]
    return [(worker, "step_graphs"), (worker, "verify_graphs"), (worker, "draft_graphs")]


def step_graphs(worker) -> list:
    """The graph objects a greedy decode step of `worker` replays (empty: none)."""
    if getattr(worker, "runner", worker) is worker:
        return [worker.graphs] if worker.graphs is not None else []
    if worker.step_graphs is not None:
        return [worker.step_graphs]
    return [g for g in (worker.draft_graphs, worker.verify_graphs) if g is not None]


@contextlib.contextmanager
def instrument(timer: ComponentTimer, worker, leaves: bool = False):
    """Every component of a step of `worker` (a ModelRunner, or a StockSpecWorker around one)
    reports to timer inside the block, on the eager path and inside graph captures made in it;
    everything is restored on exit. leaves: only spans with no span inside (the graph pass):
    see target_hooks; the graphs' recurrent conv and delta rule (`mix`) are wrapped instead."""
    from specpilot.engine import model_runner
    from specpilot.engine.cuda_graph import TargetGraphs
    from specpilot.spec import stock_worker

    runner = getattr(worker, "runner", worker)
    handles = target_hooks(timer, runner.model, leaves)
    targets = [getattr(g, "target", g) for g in step_graphs(worker)]  # a step graph's VERIFY
    backends = [runner.backend] + [g.backend for g in targets if isinstance(g, TargetGraphs)]
    try:
        with contextlib.ExitStack() as stack:
            for b in backends:
                stack.enter_context(timer.wrap(b, "forward", _attention_label))
                if getattr(b, "recurrent", None) is not None:  # a graph's commit (step graph)
                    stack.enter_context(timer.wrap(b.recurrent, "commit", "gdn.commit"))
                    if leaves and getattr(b.recurrent, "tensorized", False):  # conv + delta
                        stack.enter_context(timer.wrap(b.recurrent, "mix", "gdn.recurrent"))
            stack.enter_context(timer.wrap(runner.model, "compute_logits", "lm_head"))
            stack.enter_context(timer.wrap(model_runner, "sample", "sample/accept"))
            if runner.states is not None:
                stack.enter_context(timer.wrap(runner, "commit_verify", "gdn.commit"))
            if worker is not runner:
                handles += timer.hook(worker.drafter, "draft.block")
                stack.enter_context(timer.wrap(worker, "proposer", "draft.head"))
                stack.enter_context(timer.wrap(worker.drafter, "store_context", "draft.store"))
                for fn in ("greedy_accept", "rejection_accept", "probs"):
                    stack.enter_context(timer.wrap(stock_worker, fn, "sample/accept"))
                if worker.step_graphs is not None:  # its accept covers argmax and simulation
                    stack.enter_context(timer.wrap(worker.step_graphs, "accept", "sample/accept"))
                elif worker.simulate is not None:
                    stack.enter_context(timer.wrap(worker.simulate, "accept", "sample/accept"))
            yield timer
    finally:
        for h in handles:
            h.remove()


@dataclass
class SpanCalibration:
    """What one leaf span costs inside a captured graph (calibrate_spans). ms."""
    span_overhead_ms: float  # a span's elapsed time beyond the kernel inside it
    node_overhead_ms: float  # replay wall added per span (its event nodes and edges)
    kernel_ms: float  # the tiny kernel's own time (reference replay / spans)
    spans: int  # spans in the calibration graph


@dataclass
class StepProfile:
    """One engine's decode step at the profiled shape. Times in ms per step."""
    engine: str  # ar | stock
    rows: int  # verify rows per request (1 for ar)
    accepted: float  # tokens per request per step, bonus included (measured)
    eager_ms: float  # median wall, graphs off, no instrumentation
    instrumented_ms: float  # median wall, graphs off, instrumented
    graph_ms: Optional[float]  # median wall with CUDA graphs; None when the engine has none
    components_ms: dict[str, float]  # mean exclusive device time per label, eager
    graph_components_ms: Optional[dict[str, float]] = None  # with graphs (module docstring)
    graph_instrumented_ms: Optional[float] = None  # median wall of the instrumented graph pass
    graph_gpu_ms: Optional[float] = None  # mean GPU time inside the graph replays per step
    graph_raw_ms: Optional[dict[str, float]] = None  # pass 2 as timed: uncorrected, no "other"
    graph_spans: Optional[dict[str, float]] = None  # pass 2's spans per step inside the graphs
    span_calibration: Optional[SpanCalibration] = None  # None: pass 2's spans ran eagerly
    notes: list[str] = field(default_factory=list)  # what the correction clamped at 0
    # pass 5 (kernel profile), when it ran: graph_components_ms then holds its in-graph times,
    # span_components_ms pass 2's span-corrected ones, kernel_stats its matching figures
    span_components_ms: Optional[dict[str, float]] = None
    kernel_stats: Optional[dict] = None
    # pass 6 (with pass 5): GPU idle ms per step by host phase, and that pass's median wall
    host_phases_ms: Optional[dict[str, float]] = None
    host_phase_wall_ms: Optional[float] = None
    # pass 7 (graphs): ms per launched step with the overlap scheduler (every engine's
    # default), None where the worker cannot overlap
    overlap_ms: Optional[float] = None

    @property
    def eager_host_gap_ms(self) -> float:
        """Eager wall - the eager components (negative: instrumented times exceed the wall)."""
        return self.eager_ms - sum(self.components_ms.values())

    @property
    def graph_host_gap_ms(self) -> Optional[float]:
        """Pass-1 wall - pass 2's corrected components (None without pass 2)."""
        if not self.graph_components_ms:
            return None
        return self.graph_ms - sum(self.graph_components_ms.values())

    @property
    def measured_ms(self) -> dict[str, float]:
        """The component times the report uses: inside the graphs where measured, else eager."""
        return self.graph_components_ms or self.components_ms

    @property
    def overlap_host_gap_ms(self) -> Optional[float]:
        """Pass 7's wall (the overlap scheduler, every engine's default) - pass 2's corrected
        components: the host time the overlap leaves on the critical path (None without both)."""
        if not self.graph_components_ms or self.overlap_ms is None:
            return None
        return self.overlap_ms - sum(self.graph_components_ms.values())

    @property
    def host_gap_ms(self) -> float:
        """The host gap the report uses: the overlapped step's where pass 7 ran (how the engines
        serve), else the plain graph pass's, else the eager one; clamped at 0 (build_report
        notes a negative graph or eager one)."""
        gap = self.overlap_host_gap_ms
        if gap is None:
            gap = self.graph_host_gap_ms if self.graph_components_ms else self.eager_host_gap_ms
        return max(0.0, gap)

    @property
    def event_nodes_ms(self) -> Optional[float]:
        """What the leaf spans' event nodes add to the instrumented graph step's wall: spans per
        step inside the graphs x the calibrated node overhead (None without a calibration)."""
        if self.span_calibration is None:
            return None
        return sum(self.graph_spans.values()) * self.span_calibration.node_overhead_ms


@dataclass
class Profile:
    device: str
    rates: Rates  # measured copy bandwidth and matrix rate
    batch: int
    context: int
    steps: int
    ar: StepProfile
    spec: Optional[StepProfile] = None


def _rate(clock, fn: Callable[[], object], work: float, reps: int) -> float:
    """work units per second of fn, after two untimed calls."""
    for _ in range(2):
        fn()
    clock.sync()
    a = clock.mark()
    for _ in range(reps):
        fn()
    b = clock.mark()
    clock.sync()
    return work * reps / (clock.ms(a, b) / 1e3)


def _copy_rate(clock, device, nbytes: int, reps: int) -> float:
    x = torch.empty(nbytes, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    return _rate(clock, lambda: y.copy_(x), 2 * nbytes, reps)  # read + write


def _gemm_rate(clock, device, n: int, reps: int) -> float:
    a = torch.randn(n, n, device=device).to(torch.bfloat16)
    b, out = torch.randn_like(a), torch.empty_like(a)
    return _rate(clock, lambda: torch.matmul(a, b, out=out), 2 * n ** 3, reps)


def measure_rates(device, copy_bytes: int = 2 << 30, gemm_n: int = 8192, reps: int = 10) -> Rates:
    """Bytes/s of a large device copy (read + write counted) and FLOP/s of a square bf16 GEMM:
    the achievable ceilings the floors use instead of the datasheet's."""
    clock = clock_for(device)
    rates = Rates(bw=_copy_rate(clock, device, copy_bytes, reps),
                  flops=_gemm_rate(clock, device, gemm_n, reps))
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
    return rates


def _start_requests(sched, batch: int, context: int, steps: int, warmup: int) -> list[str]:
    """Add `batch` greedy requests of `context` random tokens, long enough for warm-up, `steps`
    and a few more steps; prefill them and run `warmup` decode steps. Returns their ids."""
    from specpilot.core import GenerateInput, SamplingParams

    g = torch.Generator().manual_seed(0)
    rids = [f"costmodel-{time.monotonic_ns()}-{i}" for i in range(batch)]
    for rid in rids:
        ids = torch.randint(10, sched.vocab_size - 10, (context,), generator=g).tolist()
        sched.add_request(GenerateInput(rid, ids, SamplingParams(
            temperature=0, max_new_tokens=(steps + warmup + 4) * sched.decode_len,
            ignore_eos=True)))
    while sched.waiting:
        sched.step()
    for _ in range(warmup):
        sched.step()
    return rids


def timed_steps(sched, batch: int, context: int, steps: int, warmup: int, clock,
                timer: Optional[ComponentTimer] = None) -> tuple[float, float]:
    """Prefill `batch` requests of `context` random tokens, run `warmup` decode steps, time
    `steps` more, abort the requests. Returns (median ms per step, tokens per request per step)."""
    _start_requests(sched, batch, context, steps, warmup)
    produced = sum(len(r.output_ids) for r in sched.running)
    walls = []
    for _ in range(steps):
        clock.sync()
        t0 = time.perf_counter()
        if timer is not None:
            timer.active = True
        sched.step()
        clock.sync()
        walls.append((time.perf_counter() - t0) * 1e3)
        if timer is not None:
            timer.active = False
            timer.end_step()
    produced = sum(len(r.output_ids) for r in sched.running) - produced
    sched.abort_all("costmodel: timing done")
    return statistics.median(walls), produced / (steps * batch)


@contextlib.contextmanager
def launch_counter(runner):
    """Counts the steps the scheduler launches on `runner` (its forward, launch_decode and
    launch_lagged calls; not the calls they make themselves). Yields a one-element list."""
    count, depth = [0], [0]
    names = [n for n in ("forward", "launch_decode", "launch_lagged") if hasattr(runner, n)]
    orig = {n: getattr(runner, n) for n in names}

    def counted(f):
        def call(*a, **k):
            count[0] += depth[0] == 0
            depth[0] += 1
            try:
                return f(*a, **k)
            finally:
                depth[0] -= 1
        return call

    for n in names:
        setattr(runner, n, counted(orig[n]))
    try:
        yield count
    finally:
        for n in names:
            setattr(runner, n, orig[n])


def overlapped_steps(sched, batch: int, context: int, steps: int, warmup: int, clock) -> float:
    """timed_steps for an overlapped scheduler, whose step() calls are not steps (the first one
    only launches, later ones launch the next step and read the previous): the time of a run
    of at least `steps` launched steps, synchronised at both ends, over the steps launched.
    Returns ms per launched step."""
    rids = _start_requests(sched, batch, context, steps, warmup)
    with launch_counter(sched.runner) as launched:
        clock.sync()
        t0 = time.perf_counter()
        while launched[0] < steps:
            sched.step()
        clock.sync()
        dt = (time.perf_counter() - t0) * 1e3
    for rid in rids:  # a step is in flight: abort, then let the scheduler drop it
        sched.abort(rid)
    while not sched.is_idle():
        sched.step()
    return dt / launched[0]


@contextlib.contextmanager
def instrumented_graphs(timer: ComponentTimer, graphs: list, batch: int):
    """Swap bucket(batch)'s graph of each object in `graphs` for one captured with the timer's
    spans inside (the timer must be instrumenting the engine); swap the originals back on exit.
    Objects running eager twins (no capture: the CPU) are left alone: their spans are recorded
    per step like eager ones."""
    saved = []
    try:
        for g in graphs:
            bs = g.bucket(batch)
            if not g.captured or bs is None:
                continue
            saved.append((g, bs, g.graphs[bs], g.outputs[bs]))
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                g._prepare(bs, [], [])
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            timer.active = timer.in_graph = True
            with torch.cuda.graph(graph, stream=stream):
                out = g._forward(bs)
            timer.active = timer.in_graph = False
            g.graphs[bs], g.outputs[bs] = graph, out
        timer.freeze()
        yield
    finally:
        timer.active = timer.in_graph = False
        for g, bs, graph, out in saved:
            g.graphs[bs], g.outputs[bs] = graph, out


def calibrate_spans(spans: int = 64, replays: int = 20, warmup: int = 3) -> SpanCalibration:
    """The cost of one leaf span inside a captured graph, on the current CUDA device. Two graphs:
    `spans` back-to-back spans, each a CudaClock mark pair (the event nodes ComponentTimer records
    for a leaf) around one in-place add on a 1-element tensor, and the same adds without events.
    They replay in pairs, `warmup` untimed, then `replays` timed with events around each replay
    (outside it, as pass 1 times the step graphs), each timed replay queued behind an untimed one
    of the same graph so that the host's launch latency stays out; figures are medians over the
    pairs. span overhead = the spans' mean elapsed - the reference replay / spans (the add's own
    time); node overhead = (instrumented replay - reference replay) / spans."""
    clock = CudaClock()
    x = torch.zeros(1, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        x.add_(1)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    ref, inst, marks = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph(), []
    with torch.cuda.graph(ref, stream=stream):
        for _ in range(spans):
            x.add_(1)
    with torch.cuda.graph(inst, stream=stream):
        for _ in range(spans):
            start = clock.mark()
            x.add_(1)
            marks.append((start, clock.mark()))

    def replay(graph: torch.cuda.CUDAGraph) -> tuple:
        graph.replay()  # the GPU runs this one while the host launches the timed one
        a = clock.mark()
        graph.replay()
        return a, clock.mark()

    ref_ms, span_extra, node_extra = [], [], []
    for i in range(warmup + replays):
        r, n = replay(ref), replay(inst)
        clock.sync()
        if i >= warmup:
            ref_ms.append(clock.ms(*r))
            span_extra.append(sum(clock.ms(a, b) for a, b in marks) - ref_ms[-1])
            node_extra.append(clock.ms(*n) - ref_ms[-1])
    return SpanCalibration(span_overhead_ms=statistics.median(span_extra) / spans,
                           node_overhead_ms=statistics.median(node_extra) / spans,
                           kernel_ms=statistics.median(ref_ms) / spans, spans=spans)


def correct_graph_pass(timer: ComponentTimer, graph_gpu_ms: float,
                       cal: Optional[SpanCalibration]) -> tuple[dict[str, float], list[str]]:
    """Pass 2's component ms per step, corrected for the span overhead, and notes on what had to
    be clamped. A label's time inside the graphs loses (its spans per step there) x
    cal.span_overhead_ms, clamped at 0 (cal None: the spans ran eagerly, there are no event
    nodes to remove); its time outside the graphs stays as timed. "other" = pass 1's in-graph
    GPU time (graphs without events) - the corrected leaves inside the graphs, clamped at 0."""
    overhead = 0.0 if cal is None else cal.span_overhead_ms
    spans, raw_inside = timer.mean_spans(graph_only=True), timer.mean_ms(graph_only=True)
    inside, notes = {}, []
    for label, raw in raw_inside.items():
        t = raw - spans[label] * overhead
        if t < 0:
            notes.append(f"{label}: {raw:.3f} ms in the graphs - {spans[label]:g} spans x "
                         f"{overhead * 1e3:.2f} us = {t:.3f} ms, clamped at 0")
        inside[label] = max(0.0, t)
    comps = {label: t - raw_inside.get(label, 0.0) + inside.get(label, 0.0)
             for label, t in timer.mean_ms().items()}
    other = graph_gpu_ms - sum(inside.values())
    if other < 0:
        notes.append(f"other: graph GPU time {graph_gpu_ms:.3f} ms - leaves inside "
                     f"{sum(inside.values()):.3f} ms = {other:.3f} ms, clamped at 0")
    comps["other"] = max(0.0, other)
    return comps, notes


def profile_step(worker, batch: int, context: int, steps: int, warmup: int,
                 kernels: bool = True) -> StepProfile:
    """The passes of one engine (see the module docstring): graphs, graphs instrumented, eager,
    eager instrumented, and (kernels, graphs captured) the kernel profile of the graphs and the
    host phases."""
    from specpilot.scheduler.scheduler import Scheduler

    runner = getattr(worker, "runner", worker)
    clock = clock_for(runner.device)
    sched = Scheduler(worker, None, batch, 8192, 16384)

    def run(timer=None):
        return timed_steps(sched, batch, context, steps, warmup, clock, timer)

    graphs = step_graphs(worker)
    graph_ms = graph_inst_ms = graph_comp = graph_gpu = graph_raw = graph_spans = cal = None
    span_comp = kernel_stats = phases = phase_wall = overlap_ms = None
    notes = []
    if graphs:
        replays = ComponentTimer(clock)  # pass 1: the wall, and the GPU time of the replays
        with contextlib.ExitStack() as stack:
            for g in graphs:
                stack.enter_context(replays.wrap(g, "_launch", "graph"))
            graph_ms = run(replays)[0]
        graph_gpu = replays.mean_ms().get("graph", 0.0)
        timer = ComponentTimer(clock)  # pass 2: leaf components, in the graph and outside
        try:
            # the spans become event nodes only where a graph is captured (not the CPU twins)
            cal = calibrate_spans() if any(g.captured for g in graphs) else None
            with instrument(timer, worker, leaves=True), timer.graph_scope(graphs), \
                    instrumented_graphs(timer, graphs, batch):
                graph_inst_ms, _ = run(timer)
            graph_raw, graph_spans = timer.mean_ms(), timer.mean_spans(graph_only=True)
            graph_comp, notes = correct_graph_pass(timer, graph_gpu, cal)
            if pdl.ENABLED and pdl.supported(torch.device(runner.device)):
                notes.append("PDL on: a kernel launches before the one ahead of it ends and its "
                             "profiled time includes that wait, so in-graph component times "
                             "overlap and do not add up (SPECPILOT_PDL=0 for additive ones)")
        except RuntimeError as e:  # a capture the driver refuses: say so, report eager times
            log.warning("cost model: timing inside the CUDA graphs failed (%s); the report "
                        "uses the eager component times", e)
            sched.abort_all("costmodel: graph pass failed")
            cal = None  # no graph pass to correct
        if kernels and graph_comp is not None and any(g.captured for g in graphs):
            try:  # pass 5: the buffers still hold pass 2's last step
                inside, kernel_stats = kernel_pass(worker, graphs, batch)
                span_comp, graph_comp = graph_comp, combine_kernel_pass(timer, inside)
            except (RuntimeError, ValueError) as e:
                log.warning("cost model: the kernel profile of the graphs failed (%s); the "
                            "report uses the span-corrected times", e)
                notes.append(f"kernel profile failed ({e}); in-graph times are span-corrected")
            try:  # pass 6: what the host does while the GPU idles
                phases, phase_wall = host_phase_pass(sched, worker, batch, context, steps,
                                                     warmup, clock)
            except Exception as e:  # a diagnostic pass: report it, keep the other passes
                log.exception("cost model: the host-phase profile failed")
                sched.abort_all("costmodel: host-phase pass failed")
                notes.append(f"host-phase profile failed ({type(e).__name__}: {e})")
        if hasattr(worker, "launch_decode"):  # pass 7: the overlapped scheduler's steps
            overlap_ms = overlapped_steps(Scheduler(worker, None, batch, 8192, 16384,
                                                    overlap=True),
                                          batch, context, steps, warmup, clock)
    owners = graph_objects(worker)
    saved = [getattr(o, a) for o, a in owners]
    for o, a in owners:
        setattr(o, a, None)
    try:
        eager_ms, accepted = run()
        timer = ComponentTimer(clock)
        with instrument(timer, worker):
            inst_ms, _ = run(timer)
    finally:
        for (o, a), g in zip(owners, saved):
            setattr(o, a, g)
    engine = "ar" if worker is runner else "stock"
    return StepProfile(engine, getattr(worker, "num_draft_tokens", 1), accepted, eager_ms,
                       inst_ms, graph_ms, timer.mean_ms(), graph_comp, graph_inst_ms, graph_gpu,
                       graph_raw, graph_spans, cal, notes, span_comp, kernel_stats, phases,
                       phase_wall, overlap_ms)


def build_engine(target_dir: str, drafter_dir: Optional[str], batch: int, context: int,
                 block: Optional[int], accepted: Optional[float], new_tokens: int,
                 device: str = "cuda", dtype: str = "bfloat16", attention_backend: str = "auto",
                 weight_format: str = "auto"):
    """OfflineEngine with random weights of the real shapes (--load-format dummy; weight_format
    w12: every linear layer, target and drafter, converted to W12 at load), room for
    `batch` requests of context + new_tokens, ar CUDA graphs captured where the runner supports
    them. accepted: SIMULATED acceptance (SGLANG_SIMULATE_ACC_LEN, read when the stock worker is
    built), since random drafters accept nothing."""
    from specpilot.config import ServerArgs
    from specpilot.offline import OfflineEngine
    from specpilot.spec.simulate import simulated_acceptance

    ctx = context + new_tokens + 64
    args = ServerArgs(model_path=target_dir, device=device, dtype=dtype, load_format="dummy",
                      context_length=ctx, max_total_tokens=batch * ctx + 64,
                      max_running_requests=batch, skip_tokenizer_init=True,
                      attention_backend=attention_backend, cuda_graph_max_bs=batch,
                      speculative_draft_model_path=drafter_dir,
                      speculative_num_draft_tokens=block if drafter_dir else None,
                      speculative_draft_load_format="dummy", weight_format=weight_format)
    with simulated_acceptance(accepted):
        eng = OfflineEngine(args)
    rn = eng.runner
    if rn.graphs is None and rn.graph_support() is None:
        rn.enable_cuda_graphs(batch)  # ar's DECODE graphs beside stock's VERIFY graphs
    return eng


def profile_engine(eng, batch: int, context: int, steps: int = 8, warmup: int = 2,
                   rates: Optional[Rates] = None, kernels: bool = True) -> Profile:
    """ar (on the engine's runner) and, when the engine speculates, stock; rates: measured
    device ceilings (measure_rates()) to attach, default the nominal ones; kernels: passes 5
    and 6."""
    rn = eng.runner
    ar = profile_step(rn, batch, context, steps, warmup, kernels)
    spec = None
    if eng.worker is not rn:
        spec = profile_step(eng.worker, batch, context, steps, warmup, kernels)
    return Profile(str(rn.device), rates or Rates(), batch, context, steps, ar, spec)
