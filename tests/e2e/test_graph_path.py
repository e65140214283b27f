"""The CUDA-graph step path (engine/cuda_graph.py) with the Triton attention backend, run as its
eager twin on CPU (capture=False, Triton interpreter): padded batch buckets, static buffers and
padding requests must leave greedy output identical to the torch reference engine, for `ar`
(DECODE graphs) and `stock` (VERIFY graphs with feature capture and the drafter's block pass,
separately or in the whole greedy step, StockStepGraphs). The GPU run, with real graph capture,
is scripts/gpu_graph_check.py.
"""

import random

import pytest

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from tests.e2e.tiny_drafters import make_drafter
from tests.e2e.tiny_models import make_tiny

NEW = 12
GREEDY = SamplingParams(temperature=0, max_new_tokens=NEW, ignore_eos=True)


def prompts():
    rng = random.Random(11)
    return [[rng.randrange(3, 250) for _ in range(n)] for n in (1, 9, 30)]  # 3 requests: bucket 4


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    target = make_tiny("qwen3", tmp_path_factory.mktemp("target"))
    drafter = make_drafter("dflash", tmp_path_factory.mktemp("drafter"))
    ref = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=1024))
    return target, drafter, [o.output_ids for o in ref.generate(prompts(), GREEDY)]


@pytest.mark.interpreter
def test_ar_decode_graph_path_equals_torch(setup):
    target, _, ref = setup
    eng = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=1024,
                                   attention_backend="triton"))
    eng.runner.enable_cuda_graphs(max_bs=4, capture=False)
    calls = []
    run = eng.runner.graphs.run
    eng.runner.graphs.run = lambda *a: calls.append(len(a[0])) or run(*a)
    assert [o.output_ids for o in eng.generate(prompts(), GREEDY)] == ref
    assert calls and max(calls) == 3 and eng.runner.graphs.bucket(3) == 4  # padded steps ran


@pytest.mark.interpreter
def test_stock_verify_graph_path_equals_ar(setup):
    target, drafter, ref = setup
    eng = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=1024,
                                   attention_backend="triton", speculative_draft_model_path=drafter,
                                   speculative_num_draft_tokens=4))
    # 3 requests: bucket 4, 1 padding; the separate graphs (the whole-step graph: below)
    eng.worker.enable_cuda_graphs(max_bs=4, capture=False, step=False)
    calls = []
    for g in (eng.worker.verify_graphs, eng.worker.draft_graphs):
        g.run = (lambda run, name: lambda *a: calls.append((name, len(a[0]))) or run(*a))(
            g.run, type(g).__name__)
    outs = eng.generate(prompts(), GREEDY)
    assert ("TargetGraphs", 3) in calls and ("DraftGraphs", 3) in calls
    assert [o.output_ids for o in outs] == ref
    assert eng.scheduler.alloc.used_tokens == 0
    # the graphed drafter block pass proposes what the eager torch path proposes: same steps
    eager = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=1024,
                                     speculative_draft_model_path=drafter,
                                     speculative_num_draft_tokens=4)).generate(prompts(), GREEDY)
    assert [o.meta["spec_verify_ct"] for o in outs] == [o.meta["spec_verify_ct"] for o in eager]


def _stock(target, drafter, **kw):
    return OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=1024,
                                    attention_backend="triton", speculative_draft_model_path=drafter,
                                    speculative_num_draft_tokens=4, **kw))


def _count_runs(graphs, calls):
    run = graphs.run
    graphs.run = lambda *a: calls.append(len(a[0])) or run(*a)


@pytest.mark.interpreter
def test_stock_step_graph_equals_ar(setup):
    """The whole greedy step in one graph (draft, propose, verify, accept, context store) gives
    ar's output; a sampled request in the batch takes the separate graphs instead."""
    target, drafter, ref = setup
    eng = _stock(target, drafter)
    eng.worker.enable_cuda_graphs(max_bs=4, capture=False)
    steps, verify = [], []
    _count_runs(eng.worker.step_graphs, steps)
    _count_runs(eng.worker.verify_graphs, verify)
    outs = eng.generate(prompts(), GREEDY)
    assert [o.output_ids for o in outs] == ref
    assert 3 in steps and not verify
    assert eng.scheduler.alloc.used_tokens == 0
    sampled = SamplingParams(temperature=0.8, seed=5, max_new_tokens=NEW, ignore_eos=True)
    steps.clear()
    eng.generate(prompts(), [GREEDY, GREEDY, sampled])
    assert verify and 3 not in steps


@pytest.mark.interpreter
def test_stock_step_graph_simulated_acceptance(setup, monkeypatch):
    """Simulated acceptance through the step graph: the same accept counts and tokens as the
    separate-graph path, step for step (both draw the count from the same seeded stream); in
    fixed token mode the same counts with filler ids."""
    target, drafter, _ = setup
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "2.5")
    outs = []
    for step in (True, False):
        eng = _stock(target, drafter)
        eng.worker.enable_cuda_graphs(max_bs=4, capture=False, step=step)
        calls = []
        _count_runs(eng.worker.step_graphs or eng.worker.verify_graphs, calls)
        outs.append([(o.output_ids, o.meta["spec_verify_ct"]) for o in eng.generate(prompts(),
                                                                                   GREEDY)])
        assert 3 in calls
    assert outs[0] == outs[1]
    assert outs[0][0][1] < NEW  # more than one token per step
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_TOKEN_MODE", "fixed")  # filler ids, same counts
    eng = _stock(target, drafter)
    eng.worker.enable_cuda_graphs(max_bs=4, capture=False)
    fixed = [(o.output_ids, o.meta["spec_verify_ct"]) for o in eng.generate(prompts(), GREEDY)]
    assert [c for _, c in fixed] == [c for _, c in outs[0]]
    # the first token comes from prefill, which is not simulated
    assert all(ids[1:] == [eng.worker.simulate.filler_id] * (NEW - 1) for ids, _ in fixed)


def test_backend_flag_checks(setup):
    target = setup[0]
    with pytest.raises(ValueError, match="--attention-backend"):
        ServerArgs(model_path=target, attention_backend="flash").validate()
    eng = OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=256))
    assert eng.runner.attention_backend == "torch" and eng.runner.graphs is None
    assert "CUDA" in eng.runner.graph_support()


@pytest.mark.gpu
def test_gpu_ar_graphs_with_pdl_equal_without(setup, monkeypatch):
    """Programmatic dependent launch in the captured DECODE graphs (kernels/pdl.py: the bf16
    GEMVs, norms and SiLU-mul; $SPECPILOT_PDL, read by the model runner) leaves greedy output
    unchanged: every PDL-launched kernel waits for the one before it before reading its
    output."""
    from specpilot.kernels import pdl

    target, _, _ = setup
    outs = {}
    for on in ("0", "1"):
        monkeypatch.setenv("SPECPILOT_PDL", on)
        eng = OfflineEngine(ServerArgs(model_path=target, device="cuda", dtype="bfloat16",
                                       max_total_tokens=1024, attention_backend="triton",
                                       cuda_graph_max_bs=4))
        assert eng.runner.graphs is not None and eng.runner.graphs.captured
        assert pdl.ENABLED is (on == "1")
        outs[on] = [o.output_ids for o in eng.generate(prompts(), GREEDY)]
        del eng
    assert outs["1"] == outs["0"]


@pytest.mark.gpu
def test_gpu_hybrid_ar_and_stock_with_pdl_equal_without(tmp_path, monkeypatch):
    """The same on a hybrid (Gated DeltaNet) target, `ar` and `stock`: the conv + recurrence
    decode kernel, the verify recurrence and the conv-window commit, RoPE, the KV store and the
    attention kernels launched with PDL too."""
    from specpilot.kernels import pdl

    target = make_tiny("qwen3_5", tmp_path / "q35")
    drafter = make_drafter("dflash", tmp_path / "d", target_layers=(1, 5), num_target_layers=8)
    outs = {}
    for on in ("0", "1"):
        monkeypatch.setenv("SPECPILOT_PDL", on)
        for name, kw in (("ar", {}), ("stock", dict(speculative_draft_model_path=drafter,
                                                     speculative_num_draft_tokens=4))):
            eng = OfflineEngine(ServerArgs(model_path=target, device="cuda", dtype="bfloat16",
                                           max_total_tokens=1024, attention_backend="triton",
                                           cuda_graph_max_bs=4, **kw))
            assert pdl.ENABLED is (on == "1")
            outs[(name, on)] = [o.output_ids for o in eng.generate(prompts(), GREEDY)]
            del eng
    assert outs[("ar", "1")] == outs[("ar", "0")]
    assert outs[("stock", "1")] == outs[("stock", "0")]


def test_pdl_setting_on_cpu(setup, monkeypatch):
    """$SPECPILOT_PDL: unset means on where supported (not on a CPU); 1 where it is not supported
    is an error, not a silent fallback."""
    from specpilot.kernels import pdl

    target, _, _ = setup
    monkeypatch.setenv("SPECPILOT_PDL", "1")
    with pytest.raises(ValueError, match="SPECPILOT_PDL=1 needs a CUDA GPU"):
        OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=256))
    monkeypatch.delenv("SPECPILOT_PDL")
    monkeypatch.setattr(pdl, "ENABLED", True)
    OfflineEngine(ServerArgs(model_path=target, device="cpu", max_total_tokens=256))
    assert pdl.ENABLED is False
