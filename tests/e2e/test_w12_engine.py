"""--weight-format w12 in the engine (CPU reference path of W12Linear): the demo model's linear
layers become W12 at load time and greedy output equals the same model in bf16, for `ar` and for
`stock` with the shipped drafter (whose linears are converted too)."""

import logging

import pytest
import torch

from specpilot.config import ServerArgs
from specpilot.core import SamplingParams
from specpilot.offline import OfflineEngine
from specpilot.settings import ASSETS_DIR
from specpilot.w12.linear import W12Linear

SP = SamplingParams(temperature=0, max_new_tokens=12, ignore_eos=True)
PROMPTS = [[1, 9690, 28, 260, 1345, 314], [1, 504, 3458, 282, 5259, 314, 216]]


def test_w12_engine_equals_bf16(demo_model_dir):
    common = dict(model_path=demo_model_dir, device="cpu", dtype="bfloat16", max_total_tokens=512)
    ref = [o.output_ids for o in OfflineEngine(ServerArgs(**common)).generate(PROMPTS, SP)]
    ar = OfflineEngine(ServerArgs(**common, weight_format="w12"))
    rep = ar.runner.w12_report
    assert rep["converted"] == 30 * 4 and "kept: tied weight" in rep["layers"].values()  # fused
    assert isinstance(ar.runner.model.model.layers[0].mlp.down_proj, W12Linear)
    assert [o.output_ids for o in ar.generate(PROMPTS, SP)] == ref
    st = OfflineEngine(ServerArgs(**common, weight_format="w12", speculative_draft_model_path=str(
        ASSETS_DIR / "smollm2-135m-dflash")))
    assert isinstance(st.worker.drafter.fc, W12Linear)
    assert [o.output_ids for o in st.generate(PROMPTS, SP)] == ref
    # --speculative-draft-weight-format bf16: a W12 target with a dense drafter (the drafter's
    # context K/V fused again, as in a bf16 engine)
    dense = OfflineEngine(ServerArgs(**common, weight_format="w12", speculative_draft_model_path=str(
        ASSETS_DIR / "smollm2-135m-dflash"), speculative_draft_weight_format="bf16"))
    assert isinstance(dense.runner.model.model.layers[0].mlp.down_proj, W12Linear)
    assert not any(isinstance(m, W12Linear) for m in dense.worker.drafter.modules())
    assert "context_kv_proj" in dense.worker.drafter._modules
    assert [o.output_ids for o in dense.generate(PROMPTS, SP)] == ref


def test_w12_needs_bf16(demo_model_dir):
    with pytest.raises(ValueError, match="--dtype bfloat16"):
        OfflineEngine(ServerArgs(model_path=demo_model_dir, device="cpu", dtype="float32",
                                 max_total_tokens=256, weight_format="w12"))
    with pytest.raises(ValueError, match="--weight-format"):
        ServerArgs(weight_format="w8").validate()
    with pytest.raises(ValueError, match="--speculative-draft-weight-format must be one of"):
        ServerArgs(speculative_draft_model_path="d", speculative_draft_weight_format="w8").validate()
    with pytest.raises(ValueError, match="need --speculative-draft-model-path"):
        ServerArgs(speculative_draft_weight_format="bf16").validate()
    # a W12 drafter needs bf16 weights as a W12 target does
    with pytest.raises(ValueError, match="--dtype bfloat16"):
        OfflineEngine(ServerArgs(model_path=demo_model_dir, device="cpu", dtype="float32",
                                 max_total_tokens=256, speculative_draft_model_path=str(
                                     ASSETS_DIR / "smollm2-135m-dflash"),
                                 speculative_draft_weight_format="w12"))


def test_w12_checkpoint_served_as_w12(demo_model_dir, tmp_path, caplog):
    """A folder written by ``python -m specpilot.w12 convert`` (the target's in shards) loads
    directly: its tensors are decoded bit for bit, --weight-format auto serves it as w12 (bf16),
    and greedy output equals the bf16 checkpoint's, for `ar` and for `stock` with a converted
    drafter too. In float32 it loads the decoded values into float32 layers (with a warning),
    as the bf16 folder does."""
    from specpilot.models.loader import checkpoint_files
    from specpilot.w12 import convert

    target, drafter = tmp_path / "target", tmp_path / "drafter"
    convert(demo_model_dir, str(target), log=lambda *_: None, shard_bytes=64 << 20)  # 3 shards
    convert(str(ASSETS_DIR / "smollm2-135m-dflash"), str(drafter), log=lambda *_: None)
    assert set(checkpoint_files(str(target))) == set(checkpoint_files(demo_model_dir))
    assert len(set(checkpoint_files(str(target)).values())) >= 3
    common = dict(device="cpu", dtype="bfloat16", max_total_tokens=512)
    bf16 = OfflineEngine(ServerArgs(model_path=demo_model_dir, **common))
    ref = [o.output_ids for o in bf16.generate(PROMPTS, SP)]
    caplog.set_level(logging.INFO)
    ar = OfflineEngine(ServerArgs(model_path=str(target), **common))
    assert ar.runner.weight_format == "w12" and "serves it as w12" in caplog.text
    assert isinstance(ar.runner.model.model.layers[0].mlp.down_proj, W12Linear)
    emb = ar.runner.model.get_input_embeddings().weight
    assert torch.equal(emb.view(torch.int16),
                       bf16.runner.model.get_input_embeddings().weight.view(torch.int16))
    assert [o.output_ids for o in ar.generate(PROMPTS, SP)] == ref
    st = OfflineEngine(ServerArgs(model_path=str(target), **common,
                                  speculative_draft_model_path=str(drafter)))
    assert isinstance(st.worker.drafter.fc, W12Linear)
    assert [o.output_ids for o in st.generate(PROMPTS, SP)] == ref
    caplog.clear()
    f32 = dict(common, dtype="float32")
    dense = OfflineEngine(ServerArgs(model_path=str(target), **f32))
    assert dense.runner.weight_format == "auto" and "W12 checkpoint" in caplog.text
    assert ([o.output_ids for o in dense.generate(PROMPTS, SP)]
            == [o.output_ids for o in OfflineEngine(ServerArgs(
                model_path=demo_model_dir, **f32)).generate(PROMPTS, SP)])


def _tiny_hybrid_dflash2(tmp_path) -> tuple[str, str]:
    """A tiny hybrid (Gated DeltaNet) target and a DFlash2 drafter for it (folders)."""
    from tests.e2e.tiny_drafters import make_drafter
    from tests.e2e.tiny_models import make_tiny

    return (make_tiny("qwen3_5", tmp_path / "q35"),
            make_drafter("dflash2", tmp_path / "d2", target_layers=(1, 5), num_target_layers=8))


@pytest.mark.gpu
def test_gpu_w12_stock_graphs_equal_eager(tmp_path, monkeypatch):
    """W12 `stock` on the GPU with its CUDA graphs (VERIFY, the drafter's block pass and the
    whole greedy step): a tiny hybrid target and DFlash2 drafter (its dynamic convolutions and
    candidate selector), every linear layer W12, greedy output equal to the same engine run
    eagerly. Three requests (the verify's 24 rows run the template GEMM) and one (8 rows: the
    mma kernel; a prefill's one-row lm_head the GEMV). Default kernel configs (no tuning), so
    both engines run the same kernels; the counters outgrown by tuning, the likely cause of the
    failure on Qwen3.8-27B's shapes (docs/w12.md, Known limitations), have their own test
    (test_w12_kernel.py::test_gpu_graph_survives_outgrown_split_k_counters)."""
    from tests.e2e.test_graph_path import prompts

    monkeypatch.setenv("SPECPILOT_W12_AUTOTUNE", "0")
    target, drafter = _tiny_hybrid_dflash2(tmp_path)
    outs = {}
    for graphs in (False, True):
        eng = OfflineEngine(ServerArgs(
            model_path=target, device="cuda", dtype="bfloat16", max_total_tokens=1024,
            attention_backend="triton", weight_format="w12", cuda_graph_max_bs=4,
            disable_cuda_graph=not graphs, speculative_draft_model_path=drafter))
        assert isinstance(eng.worker.drafter.candidate_selector.hidden_projection, W12Linear)
        assert (eng.worker.step_graphs is not None) is graphs
        outs[graphs] = ([o.output_ids for o in eng.generate(prompts(), SP)],
                        [o.output_ids for o in eng.generate(prompts()[2:], SP)])
        torch.cuda.synchronize()
        del eng
    assert outs[True] == outs[False]


@pytest.mark.interpreter
def test_w12_stock_kernels_through_the_step_graph_twin(tmp_path, monkeypatch):
    """The CPU counterpart of the GPU test above: W12 `stock` (tiny hybrid target + DFlash2
    drafter) with every W12 layer run by the Triton kernels in the interpreter (the GEMV at
    <= 2 rows, else the template GEMM, split-K included) instead of the CPU reference, through
    the whole step graph's eager twin and through plain eager steps: the same greedy output,
    and every access of every interpreted kernel inside its arguments (tests/conftest.py's
    bounds check; the engine's own Triton paths here: attention, the KV store, the Gated
    DeltaNet and conv kernels)."""
    from specpilot.w12 import gemv
    from specpilot.w12 import kernel as Kn
    from tests.e2e.test_graph_path import prompts

    calls = {"gemv": 0, "gemm": 0}

    def kernel_forward(self, x):
        x2 = x.reshape(-1, self.in_features)
        path = "gemv" if x2.shape[0] <= Kn.GEMV_MAX_M else "gemm"
        calls[path] += 1
        y = (gemv.w12_gemv if path == "gemv" else Kn.w12_matmul)(x2, self.planes())
        return y.reshape(*x.shape[:-1], self.out_features)

    monkeypatch.setattr(W12Linear, "forward", kernel_forward)
    target, drafter = _tiny_hybrid_dflash2(tmp_path)
    sp = SamplingParams(temperature=0, max_new_tokens=6, ignore_eos=True)
    outs = []
    for twin in (True, False):
        eng = OfflineEngine(ServerArgs(
            model_path=target, device="cpu", dtype="bfloat16", max_total_tokens=1024,
            attention_backend="triton", weight_format="w12", speculative_draft_model_path=drafter))
        if twin:
            eng.worker.enable_cuda_graphs(max_bs=4, capture=False)
            steps = []
            run = eng.worker.step_graphs.run
            eng.worker.step_graphs.run = lambda *a: steps.append(len(a[0])) or run(*a)
        outs.append([o.output_ids for o in eng.generate(prompts()[2:], sp)])
        if twin:
            assert 1 in steps
    assert outs[0] == outs[1]
    assert calls["gemv"] > 0 and calls["gemm"] > 100
