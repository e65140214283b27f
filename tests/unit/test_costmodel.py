"""Cost model (specpilot/costmodel): hand-checked counts, real-shape weight bytes against the model
classes built on the meta device, the CLI on CPU, and the profiling plumbing on a tiny engine with
the CPU clock."""

import json
import os

import pytest
import torch

from specpilot.costmodel import profile as prof
from specpilot.costmodel.__main__ import MODEL_CONFIGS, main
from specpilot.costmodel.counts import Rates, Step, TargetShape, attention, step_costs
from specpilot.costmodel.report import build_report, render
from specpilot.spec.draft_config import DraftConfig

LLAMA = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
         "vocab_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
         "num_key_value_heads": 1, "head_dim": 4}
TINY_HYBRID = {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text",
               "vocab_size": 256, "hidden_size": 64, "intermediate_size": 96,
               "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
               "linear_key_head_dim": 8, "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4,
               "layer_types": ["linear_attention"] * 3 + ["full_attention"],
               "rms_norm_eps": 1e-6, "max_position_embeddings": 512, "eos_token_id": 2}
TINY_DFLASH2 = {"architectures": ["DFlash2DraftModel"], "model_type": "qwen3", "hidden_size": 64,
                "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256,
                "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "hidden_act": "silu",
                "is_causal": False, "sliding_window": 6,
                "layer_types": ["sliding_attention"] * 2, "num_target_layers": 4,
                "dflash_config": {"block_size": 4, "mask_token_id": 255, "target_layer_ids": [0, 2],
                                  "conv_kernel_size": 2, "conv_group_size": 16,
                                  "selector_rank": 8, "selector_top_k": 4}}


def _config(name: str) -> dict:
    with open(os.path.join(MODEL_CONFIGS, name, "config.json")) as f:
        return json.load(f)


def test_llama_counts_by_hand():
    # 2 layers, H 8, 2 q heads / 1 kv head of 4, V 32; R 2 requests, L 10, ar (1 row), bf16.
    costs = {c.name: c for c in step_costs(TargetShape.from_config(LLAMA), None, Step(2, 10))}
    qkv = costs["attn.qkv"]  # per layer: weights (8+4+4) x 8, 3 input reads of [2, 8], outputs
    assert qkv.weight_bytes == 2 * (16 * 8 * 2)
    assert qkv.bytes == 2 * (16 * 8 * 2 + 3 * 2 * 8 * 2 + 2 * 16 * 2)
    assert qkv.flops == 2 * (2 * 2 * 16 * 8)
    att = costs["attention[full]"]  # per layer: 2 requests x 10 keys x K+V, new K/V w+r, q, o
    kv_row = 2 * 1 * 4 * 2
    assert att.bytes == 2 * (2 * 10 * kv_row + 2 * 2 * kv_row + 2 * 2 * 2 * 4 * 2)
    assert att.flops == 2 * (4 * 2 * 11 * 2 * 4)
    head = costs["lm_head"]  # [2, 8] x [8, 32], fp32 logits
    assert (head.weight_bytes, head.bytes, head.flops) == (512, 512 + 32 + 2 * 32 * 4, 1024)
    assert costs["sample/accept"].bytes == 2 * 32 * 4
    floor = costs["lm_head"].floor_s(Rates(bw=100.0, flops=1e9))
    assert floor == pytest.approx(800 / 100.0)  # memory-bound: bytes / bandwidth


def test_sliding_window_kv_capped():
    shape = TargetShape.from_config(_config("muse-glimmer-30b"))
    at = {L: {c.name: c.bytes for c in step_costs(shape, None, Step(1, L))} for L in (4096, 16384)}
    assert at[4096]["attention[sliding]"] == at[16384]["attention[sliding]"]
    assert at[16384]["attention[full]"] > 3.9 * at[4096]["attention[full]"]
    capped = attention("x", 1, 1, 100_000, 2048, 32, 2, 128, 2, 1)  # reads 2048 cached keys
    assert capped.bytes == attention("x", 1, 1, 2048, None, 32, 2, 128, 2, 1).bytes
    assert capped.flops == 4 * 2048 * 32 * 128  # the new row sees 2048 keys, itself included


@pytest.mark.parametrize("name", ["qwen38-27b", "muse-glimmer-30b"])
def test_weight_bytes_match_model_parameters(name):
    from specpilot.models.loader import instantiate, load_hf_config
    from specpilot.models.registry import resolve

    hf = load_hf_config(os.path.join(MODEL_CONFIGS, name))
    model = instantiate(lambda: resolve(hf)(hf, 64), torch.bfloat16, torch.device("meta"))
    params = 2 * sum(p.numel() for p in model.parameters())
    shape = TargetShape.from_config(_config(name))
    read = sum(c.weight_bytes for c in step_costs(shape, None, Step(1, 256)))
    embedding = shape.vocab * shape.hidden * 2  # a step reads only its rows of the table
    assert read + embedding == pytest.approx(params, rel=0.02)


def test_drafter_block_weights_match_drafter_layers():
    from specpilot.models.loader import instantiate
    from specpilot.spec.drafter import BlockDrafter

    shape = TargetShape.from_config(_config("qwen38-27b"))
    dc = DraftConfig.from_path(os.path.join(MODEL_CONFIGS, "qwen38-27b-dflash2"), 64, shape.vocab)
    d = instantiate(lambda: BlockDrafter(dc, shape.hidden, 64), torch.bfloat16,
                    torch.device("meta"))
    layers = 2 * sum(p.numel() for p in d.layers.parameters())
    costs = {c.name: c for c in step_costs(shape, dc, Step.for_engine(dc, 1, 256, accepted=4.8))}
    assert costs["draft.block"].weight_bytes == pytest.approx(layers, rel=0.01)
    assert costs["draft.head"].weight_bytes >= shape.vocab * shape.hidden * 2  # the shared head


def _gap_order_ok(rep: dict) -> bool:
    from specpilot.costmodel.report import MIN_GAP

    key = [(r[rep["gap_key"]] if r[rep["gap_key"]] >= MIN_GAP else 0.0, r["floor_ms"])
           for r in rep["components"]]
    return key == sorted(key, reverse=True)


def test_cli_cpu_report_largest_gap_first(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["--target", "muse-glimmer-30b", "--drafter", "muse-glimmer-30b-dflash2",
                 "--batch", "32", "--context", "4096", "--accept", "6.5",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    rep = json.loads(out.read_text())
    assert "measured columns need a GPU" in text
    assert rep["step"]["rows"] == 16 and rep["engine"] == "stock"
    assert _gap_order_ok(rep) and rep["components"][0]["name"] == "attn.mlp.gate_up"
    table = text.split("rejected ms/tok\n", 1)[1].splitlines()
    assert table[0].split()[0] == rep["components"][0]["name"]
    assert "three largest gaps" in text and "speedup ceiling at tau=6.50" in text
    assert 1 < rep["ceiling"]["floors"] < rep["ceiling"]["oracle"] < 6.5


def test_cli_batch_list(tmp_path, capsys):
    """--batch 1,8: one report each, in order; the JSON is then a list."""
    out = tmp_path / "r.json"
    assert main(["--target", "qwen38-27b", "--drafter", "qwen38-27b-dflash2", "--batch", "1,8",
                 "--accept", "4.8", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    reps = json.loads(out.read_text())
    assert [r["step"]["batch"] for r in reps] == [1, 8]
    assert text.count("cost model: qwen38-27b") == 2 and "step: R=8 requests" in text
    with pytest.raises(SystemExit):
        main(["--target", "qwen38-27b", "--batch", "1,x"])
    assert "comma list of integers" in capsys.readouterr().err


def test_cli_settings_ar_and_errors(capsys):
    assert main(["--setting", "h200_c1_qwen38-27b_dflash2", "--accept", "4.8"]) == 0
    text = capsys.readouterr().out
    assert "verify rows B=8" in text and "gdn.commit" in text
    assert main(["--target", "qwen38-27b", "--engine", "ar"]) == 0
    assert "engine ar" in capsys.readouterr().out
    assert main(["--target", "no-such-model"]) == 2
    assert "unknown target 'no-such-model'" in capsys.readouterr().err
    assert main(["--setting", "h200_c1_qwen38-27b_dspark"]) == 2
    assert "has no config under specpilot/model_configs" in capsys.readouterr().err


class _FakeClock:
    now = 0.0

    def mark(self):
        return self.now

    def ms(self, a, b):
        return b - a

    def sync(self):
        pass


def test_timer_charges_exclusive_time():
    clock = _FakeClock()
    timer = prof.ComponentTimer(clock)
    timer.active = True
    timer.begin("outer")
    clock.now = 1.0
    timer.begin("inner")
    clock.now = 4.0
    timer.end()
    clock.now = 10.0
    timer.end()
    timer.end_step()
    assert timer.mean_ms() == {"outer": 7.0, "inner": 3.0}


def _tiny_config_dirs(tmp_path) -> dict[str, str]:
    """{"t": tiny hybrid target folder, "d": tiny DFlash2 drafter folder} (configs only)."""
    dirs = {}
    for name, cfg in (("t", TINY_HYBRID), ("d", TINY_DFLASH2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(cfg))
        dirs[name] = str(tmp_path / name)
    return dirs


def test_profile_plumbing_on_cpu(tmp_path):
    """A tiny hybrid target + DFlash2 drafter, eager on the CPU clock: every timed label is a
    counted component (and vice versa), and the engine is left as it was."""
    from specpilot.engine import model_runner
    from specpilot.spec import stock_worker

    dirs = _tiny_config_dirs(tmp_path)
    eng = prof.build_engine(dirs["t"], dirs["d"], 2, 12, 4, 2.5, 40, device="cpu",
                            dtype="float32", attention_backend="torch")
    sample, proposer = model_runner.sample, eng.worker.proposer
    p = prof.profile_engine(eng, 2, 12, steps=2, warmup=1,
                            rates=prof.measure_rates("cpu", 1 << 16, 32, reps=1))
    shape = TargetShape.from_config(TINY_HYBRID)
    dc = eng.worker.drafter.dc
    for sp, d in ((p.ar, None), (p.spec, dc)):
        step = Step.for_engine(d, 2, 12, 4, 2.5)
        assert set(sp.components_ms) == {c.name for c in step_costs(shape, d, step)}
        assert sp.graph_ms is None and sp.eager_ms > 0
    assert p.spec.accepted == 2.5 and p.spec.rows == 4  # simulated: 2 then 3 tokens per step
    assert model_runner.sample is sample and stock_worker.greedy_accept.__name__ == "greedy_accept"
    assert eng.worker.proposer is proposer and "forward" not in vars(eng.runner.backend)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in eng.runner.model.modules())
    rep = build_report(shape, dc, Step.for_engine(dc, 2, 12, 4, 2.5), p.rates, p, ("t", "d"))
    assert rep["gap_key"] == "excess_ms_per_token" and _gap_order_ok(rep)
    assert "host gap" in {r["name"] for r in rep["components"]}
    assert "measured stock: wall" in render(rep)


def test_profile_graph_pass_on_cpu(tmp_path):
    """The graph pass over the graph objects' eager twins (the CPU has no capture; the Triton
    kernels run in the interpreter): ar's DECODE graph and stock's whole-step graph are what the
    steps run, every label of their components is a counted component, and the report takes its
    measured columns and host gap from that pass."""
    dirs = _tiny_config_dirs(tmp_path)
    eng = prof.build_engine(dirs["t"], dirs["d"], 2, 12, 4, 2.5, 40, device="cpu",
                            dtype="float32", attention_backend="triton")
    eng.runner.enable_cuda_graphs(2, capture=False)
    eng.worker.enable_cuda_graphs(2, capture=False)
    runs = []
    sg = eng.worker.step_graphs
    run = sg.run
    sg.run = lambda *a: runs.append(len(a[0])) or run(*a)
    p = prof.profile_engine(eng, 2, 12, steps=2, warmup=1,
                            rates=prof.measure_rates("cpu", 1 << 16, 32, reps=1))
    assert runs  # the stock steps of the graph passes went through the step graph
    shape = TargetShape.from_config(TINY_HYBRID)
    dc = eng.worker.drafter.dc
    for sp, d in ((p.ar, None), (p.spec, dc)):
        step = Step.for_engine(d, 2, 12, 4, 2.5)
        assert set(sp.graph_components_ms) == {c.name for c in step_costs(shape, d, step)}
        assert sp.graph_ms > 0 and sp.measured_ms is sp.graph_components_ms
        assert sp.host_gap_ms == sp.graph_ms - sum(sp.graph_components_ms.values())
        # "other": the graph time its leaves leave over (clamped at 0: the CPU interpreter's
        # times differ between the two passes by more than the small ops they would show)
        assert sp.graph_components_ms["other"] >= 0 and 0 < sp.graph_gpu_ms < sp.graph_ms
    assert eng.worker.step_graphs is sg and eng.runner.graphs is not None  # restored
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in eng.runner.model.modules())
    rep = build_report(shape, dc, Step.for_engine(dc, 2, 12, 4, 2.5), p.rates, p, ("t", "d"))
    text = render(rep)
    assert "inside the CUDA graphs" in text and "with CUDA graphs" in text
