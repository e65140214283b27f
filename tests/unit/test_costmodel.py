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
from specpilot.w12.format import encode_auto

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


def test_w12_linear_weight_bytes():
    """--weight-format w12: every linear weight, target and drafter (the untied lm_head, which
    the drafter's head shares, included), at 1.5 B per element; the rest of each component, and
    a tied head, unchanged."""
    shape = TargetShape.from_config(_config("qwen38-27b"))
    dc = DraftConfig.from_path(os.path.join(MODEL_CONFIGS, "qwen38-27b-dflash2"), 64, shape.vocab)
    for d in (None, dc):
        bf, w12 = ({c.name: c for c in step_costs(shape, d, Step.for_engine(
            d, 1, 256, accepted=4.8, weight_format=f))} for f in ("bf16", "w12"))
        linear = {"attn.qkv", "attn.o", "attn.mlp.gate_up", "attn.mlp.down", "gdn.in_proj",
                  "gdn.out_proj", "gdn.mlp.gate_up", "gdn.mlp.down", "lm_head", "draft.block",
                  "draft.head", "draft.store"}
        assert linear <= set(bf) or d is None
        for name, c in bf.items():
            if name in linear:
                assert c.weight_bytes > 0
                assert w12[name].weight_bytes == pytest.approx(0.75 * c.weight_bytes)
                assert c.bytes - w12[name].bytes == pytest.approx(0.25 * c.weight_bytes)
            else:
                assert (w12[name].bytes, w12[name].weight_bytes) == (c.bytes, c.weight_bytes)
    tied = TargetShape.from_config(LLAMA | {"tie_word_embeddings": True})
    heads = [{c.name: c for c in step_costs(tied, None, Step(1, 8, weight_format=f))}["lm_head"]
             for f in ("bf16", "w12")]
    assert heads[0].weight_bytes == heads[1].weight_bytes   # the embedding table: bf16
    with pytest.raises(ValueError, match="weight_format"):
        Step(1, 8, weight_format="fp8")


def test_cli_weight_format_w12(tmp_path, capsys):
    outs = {f: tmp_path / f"{f}.json" for f in ("auto", "w12")}
    for f, out in outs.items():
        assert main(["--target", "qwen38-27b", "--weight-format", f, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("linear weights W12 (1.5 B/element)") == 1
    bf, w12 = (json.loads(outs[f].read_text())["totals"] for f in ("auto", "w12"))
    assert 0.75 < w12["ar_floor_ms"] / bf["ar_floor_ms"] < 0.78   # embedding rows, KV, state
    with pytest.raises(SystemExit):
        main(["--target", "qwen38-27b", "--weight-format", "fp8"])


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


def test_cli_settings_ar_and_errors(tmp_path, capsys):
    from tests.workflow.conftest import make_setting

    assert main(["--setting", "h200_c1_qwen38-27b_dflash2", "--accept", "4.8"]) == 0
    text = capsys.readouterr().out
    assert "verify rows B=8" in text and "gdn.commit" in text
    assert main(["--target", "qwen38-27b", "--engine", "ar"]) == 0
    assert "engine ar" in capsys.readouterr().out
    assert main(["--target", "no-such-model"]) == 2
    assert "unknown target 'no-such-model'" in capsys.readouterr().err
    assert main(["--setting", str(make_setting(tmp_path, "cpu_demo_local"))]) == 2
    assert "has no config under specpilot/model_configs" in capsys.readouterr().err


@pytest.mark.parametrize("args,msg", [
    (["--accept", "0"], "tau counts the bonus token"), (["--accept", "0.5"], "tau counts"),
    (["--block", "0"], "must be >= 2"), (["--block", "-3"], "must be >= 2"),
    (["--bw", "0"], "--bw must be > 0"), (["--bw", "-1"], "--bw must be > 0"),
    (["--dtype-bytes", "0"], "--dtype-bytes must be > 0"), (["--context", "-100"], ">= 0"),
    (["--json", "/nonexistent/dir/x.json"], "its folder does not exist")])
def test_cli_refuses_impossible_numbers(args, msg, capsys):
    """Numbers no step can have are refused before any report (a zero tau divided by zero; a
    negative block or bandwidth printed negative speedups; --bw 0 was taken as not given)."""
    with pytest.raises(SystemExit) as e:
        main(["--target", "qwen38-27b", "--drafter", "qwen38-27b-dflash2", *args])
    assert e.value.code == 2 and msg in capsys.readouterr().err


def test_cli_refuses_tau_above_the_block(capsys):
    assert main(["--target", "qwen38-27b", "--drafter", "qwen38-27b-dflash2",
                 "--accept", "20"]) == 2
    assert "tau must lie in [1, B = 8]" in capsys.readouterr().err
    assert main(["--target", "qwen38-27b", "--drafter", "qwen38-27b-dflash2",
                 "--accept", "8"]) == 0   # every draft accepted: the edge is allowed


def test_cli_refuses_a_drafter_of_another_width(tmp_path, capsys):
    """A drafter whose hidden size is not the target's (the engine refuses the pair) is refused
    by the cost model too, not reported."""
    d = tmp_path / "wide"
    d.mkdir()
    cfg = json.loads((MODEL_CONFIGS / "qwen38-27b-dflash2" / "config.json").read_text())
    cfg["hidden_size"] = 4096
    (d / "config.json").write_text(json.dumps(cfg))
    assert main(["--target", "qwen38-27b", "--drafter", str(d), "--accept", "4"]) == 2
    assert "drafter hidden_size 4096 differs from the target's 5120" in capsys.readouterr().err


@pytest.mark.parametrize("target,layers,rows", [("qwen38-27b", 64, 8),
                                                ("muse-glimmer-30b", 52, 16)])
def test_shipped_dspark_drafters(target, layers, rows, tmp_path, capsys):
    """The DSpark drafters' configs (model_configs/README.md: what comes from the cards) fit
    their targets, and every DSpark setting's cost model runs from them, Markov head counted."""
    with open(os.path.join(MODEL_CONFIGS, target, "config.json")) as f:
        tcfg = json.load(f)
    tcfg = tcfg.get("text_config", tcfg)
    dc = DraftConfig.from_path(os.path.join(MODEL_CONFIGS, target + "-dspark"), layers,
                               tcfg["vocab_size"])
    assert dc.algorithm == "DSPARK" and dc.num_draft_tokens == rows
    assert dc.hf.hidden_size == tcfg["hidden_size"] and dc.hf.vocab_size == tcfg["vocab_size"]
    assert dc.markov_rank == 256 and dc.enable_confidence_head
    reps = {}
    for gpu in ("h100", "h200"):
        out = tmp_path / f"{gpu}.json"
        assert main(["--setting", f"{gpu}_c1_{target}_dspark", "--accept", "4", "--json",
                     str(out)]) == 0
        reps[gpu] = json.loads(out.read_text())
    text = capsys.readouterr().out
    assert f"{target}-dspark (DSPARK)" in text and f"verify rows B={rows}" in text
    assert f"draft block Bd={rows - 1}" in text
    comp = {c["name"]: c for c in reps["h100"]["components"]}
    # the shared lm_head over the draft rows, and the Markov head's W2 [256 -> vocab] once per
    # proposal slot (each slot's bias needs the previous slot's token)
    assert comp["draft.head"]["weight_bytes"] == (comp["lm_head"]["weight_bytes"]
                                                  + (rows - 1) * 256 * tcfg["vocab_size"] * 2)
    assert reps["h200"]["rates"]["source"] == "nominal H200"


def test_cli_settings_final_engine(tmp_path, capsys):
    """--engine final: stock plus the setting's landed --weight-format (W12 on the H100 and H200
    settings, nothing on the RTX PRO 6000 ones); a conflicting --weight-format, final without a
    setting, and a landed flag the model does not count are errors."""
    from tests.workflow.conftest import make_setting

    reps = {}
    for name, eng in (("h100_c1_qwen38-27b_dflash2", "final"), ("h100_c1_qwen38-27b_dflash2",
                      "stock"), ("h200_c1_qwen38-27b_dflash2", "final")):
        out = tmp_path / f"{name}_{eng}.json"
        assert main(["--setting", name, "--engine", eng, "--accept", "4.8", "--json",
                     str(out)]) == 0
        reps[name[:4], eng] = json.loads(out.read_text())
    capsys.readouterr()
    final, stock, h200 = reps["h100", "final"], reps["h100", "stock"], reps["h200", "final"]
    assert (final["engine"], stock["engine"], h200["engine"]) == ("final", "stock", "final")
    assert final["step"]["weight_format"] == h200["step"]["weight_format"] == "w12"
    assert stock["step"]["weight_format"] == "bf16"
    assert abs(final["totals"]["weight_bytes"] / stock["totals"]["weight_bytes"] - 0.75) < 0.01
    assert h200["totals"]["bytes"] == final["totals"]["bytes"]
    # each setting's floors at its own card's nominal rates
    assert final["rates"] == stock["rates"] == dict(bw=3.35e12, flops=989e12,
                                                    source="nominal H100 80GB SXM")
    assert h200["rates"] == dict(bw=4.8e12, flops=989e12, source="nominal H200")
    assert stock["totals"]["floor_ms"] > h200["totals"]["floor_ms"]
    out = tmp_path / "rtx.json"
    assert main(["--setting", "rtxpro6000_c1_qwen38-27b_dflash2", "--engine", "final",
                 "--accept", "4.8", "--json", str(out)]) == 0
    rtx = json.loads(out.read_text())
    assert rtx["rates"]["source"] == "nominal RTX PRO 6000"
    assert (rtx["engine"], rtx["step"]["weight_format"]) == ("final", "bf16")
    assert main(["--setting", "h100_c1_qwen38-27b_dflash2", "--engine", "final",
                 "--weight-format", "auto"]) == 2
    assert "final of h100_c1_qwen38-27b_dflash2 runs --weight-format w12" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--target", "qwen38-27b", "--engine", "final"])
    assert "give --setting" in capsys.readouterr().err
    folder = make_setting(tmp_path, "cpu_demo_other", engines__final__landed=[
        {"name": "x", "issue": 0, "flags": {"--max-running-requests": 2}}],
        engines__final__note="final = stock + x")
    assert main(["--setting", str(folder), "--engine", "final"]) == 2
    assert "final's landed flags --max-running-requests are not modelled" in \
        capsys.readouterr().err


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


def _span(timer, clock, label: str, ms: float) -> None:
    timer.begin(label)
    clock.now += ms
    timer.end()


def _graph_pass_timer(steps: int = 2):
    """Pass 2 of an ar step on the fake clock, `steps` steps alike. Spans inside the graph, as
    timed (span overhead 0.02 ms each, CAL): gate_up 2 x 1.0 ms, down 2 x 0.8, lm_head 0.7,
    qkv 2 x 0.3, attention[full] 40 small ones of 0.03, attn.o 3 x 0.019 (less than the
    overhead: timing noise), gdn.commit 0.05; outside: sample/accept 0.1, gdn.commit 0.1."""
    clock = _FakeClock()
    timer = prof.ComponentTimer(clock)
    for _ in range(steps):
        timer.active = timer.in_graph = True
        for label, n, ms in (("attn.mlp.gate_up", 2, 1.0), ("attn.mlp.down", 2, 0.8),
                             ("lm_head", 1, 0.7), ("attn.qkv", 2, 0.3),
                             ("attention[full]", 40, 0.03),
                             ("attn.o", 3, 0.019), ("gdn.commit", 1, 0.05)):
            for _ in range(n):
                _span(timer, clock, label, ms)
        timer.in_graph = False
        _span(timer, clock, "sample/accept", 0.1)
        _span(timer, clock, "gdn.commit", 0.1)
        timer.active = False
        timer.end_step()
    return timer


CAL = prof.SpanCalibration(span_overhead_ms=0.02, node_overhead_ms=0.03, kernel_ms=0.003,
                           spans=64)


def test_timer_counts_spans_per_step():
    timer = _graph_pass_timer(steps=2)
    assert timer.counts["attention[full]"] == 80 and timer.graph_counts["gdn.commit"] == 2
    assert timer.mean_spans(graph_only=True) == {
        "attn.mlp.gate_up": 2, "attn.mlp.down": 2, "lm_head": 1, "attn.qkv": 2,
        "attention[full]": 40, "attn.o": 3, "gdn.commit": 1}
    assert timer.mean_spans() == dict(timer.mean_spans(graph_only=True), **{
        "sample/accept": 1, "gdn.commit": 2})


def test_graph_pass_correction_subtracts_span_overhead():
    """Inside the graph each label loses spans x overhead (clamped at 0, with a note); outside
    it stays as timed; other = the uninstrumented graph GPU time - the corrected leaves."""
    timer = _graph_pass_timer()
    comps, notes = prof.correct_graph_pass(timer, 5.36, CAL)
    want = {"attn.mlp.gate_up": 1.96, "attn.mlp.down": 1.56, "lm_head": 0.68, "attn.qkv": 0.56,
            "attention[full]": 0.4, "attn.o": 0.0, "gdn.commit": 0.13, "sample/accept": 0.1,
            "other": 5.36 - (1.96 + 1.56 + 0.68 + 0.56 + 0.4 + 0.03)}
    assert comps == pytest.approx(want) and comps["attn.o"] == 0.0
    assert notes == ["attn.o: 0.057 ms in the graphs - 3 spans x 20.00 us = -0.003 ms, "
                     "clamped at 0"]
    comps, notes = prof.correct_graph_pass(timer, 4.0, CAL)  # leaves exceed the graph time
    assert comps["other"] == 0.0 and notes[-1].startswith("other: graph GPU time 4.000 ms")
    raw, notes = prof.correct_graph_pass(timer, 5.36, None)  # eager twins: nothing to remove
    assert raw == pytest.approx(dict(timer.mean_ms(), other=0.0)) and "other" in notes[0]


def _graph_profile(cal) -> prof.Profile:
    """An ar profile from _graph_pass_timer: graph wall 5.66 ms, 5.36 ms of it GPU time in the
    graph (the correction leaves a 0.1 ms host gap; uncorrected, the components exceed the
    wall, as on the H200)."""
    timer = _graph_pass_timer()
    comps, notes = prof.correct_graph_pass(timer, 5.36, cal)
    spans = timer.mean_spans(graph_only=True)
    ar = prof.StepProfile("ar", 1, 1.0, 6.0, 7.0, 5.66, {"attn.qkv": 1.0}, comps, 7.2, 5.36,
                          timer.mean_ms(), spans, cal, notes)
    return prof.Profile("cuda:0", Rates(), 1, 10, 2, ar)


def test_report_after_span_correction():
    """The host gap and "other" are consistent with the corrected leaves, and attention[full]
    (40 small spans) leaves the three largest gaps once its span overhead is removed."""
    shape, step = TargetShape.from_config(LLAMA), Step(1, 10)
    rep = build_report(shape, None, step, Rates(), _graph_profile(CAL))
    rows = {r["name"]: r["measured_ms"] for r in rep["components"]}
    assert rows["host gap"] == pytest.approx(0.1) and rows["other"] == pytest.approx(0.17)
    assert sum(v or 0.0 for v in rows.values()) == pytest.approx(5.66)  # the graph wall
    assert rep["largest_gaps"] == ["attn.mlp.gate_up", "attn.mlp.down", "lm_head"]
    assert _gap_order_ok(rep)
    ar = json.loads(json.dumps(rep))["measured"]["ar"]
    assert ar["span_calibration"]["span_overhead_ms"] == 0.02
    assert ar["graph_raw_ms"]["attention[full]"] == pytest.approx(1.2)
    assert ar["graph_spans_per_step"] == 51 and ar["event_nodes_ms"] == pytest.approx(1.53)
    assert rep["notes"] == ["measured ar: attn.o: 0.057 ms in the graphs - 3 spans x 20.00 us "
                            "= -0.003 ms, clamped at 0"]
    text = render(rep)
    assert "CORRECTED: each less its spans x the span overhead" in text
    assert ("span overhead 20.00 us, node overhead 30.00 us per span, add 3.00 us; spans per "
            "step in the graphs: ar 51") in text
    assert "(instrumented 7.20, 5.67 less 51 spans x node overhead, host gap 0.10)" in text
    # the instrumented wall less the node overhead matches the plain wall: no warning
    assert ar["residual_span_ms"] == pytest.approx((7.20 - 1.53 - 5.66) / 51)
    assert "left after the correction: the instrumented graph step runs 0.2 us" in text
    assert "WARNING" not in text
    slow = _graph_profile(CAL)
    slow.ar.graph_instrumented_ms += 51 * 0.015          # 15 us per span unexplained
    text = render(build_report(shape, None, step, Rates(), slow))
    assert "runs 15.2 us per span slower" in text
    assert "WARNING: in-graph component times overstate by up to 0.77 ms per step" in text

    raw = build_report(shape, None, step, Rates(), _graph_profile(None))  # uncorrected
    rows = {r["name"]: r["measured_ms"] for r in raw["components"]}
    assert raw["largest_gaps"] == ["attn.mlp.gate_up", "attn.mlp.down", "attention[full]"]
    assert rows["host gap"] == 0.0 and rows["other"] == 0.0  # both negative, clamped
    assert raw["notes"][-1] == ("measured ar: CUDA-graph host gap -0.747 ms (wall - components), "
                                "printed as 0")
    text = render(raw)
    assert "(instrumented 7.20, host gap 0.00)" in text and "uncorrected" in text


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
        assert sp.graph_ms is None and sp.eager_ms > 0 and sp.overlap_ms is None
    assert p.spec.accepted == 2.5 and p.spec.rows == 4  # simulated: 2 then 3 tokens per step
    assert model_runner.sample is sample and stock_worker.greedy_accept.__name__ == "greedy_accept"
    assert eng.worker.proposer is proposer and "forward" not in vars(eng.runner.backend)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in eng.runner.model.modules())
    rep = build_report(shape, dc, Step.for_engine(dc, 2, 12, 4, 2.5), p.rates, p, ("t", "d"))
    assert rep["gap_key"] == "excess_ms_per_token" and _gap_order_ok(rep)
    assert "host gap" in {r["name"] for r in rep["components"]}
    assert "measured stock: wall" in render(rep)


def test_profile_w12_engine_on_cpu(tmp_path):
    """--measure --weight-format w12 builds the engine with its linear layers converted to W12
    (the CPU runs their reference path) and times the same components the counts name."""
    dirs = _tiny_config_dirs(tmp_path)
    eng = prof.build_engine(dirs["t"], None, 2, 12, None, None, 40, device="cpu",
                            dtype="bfloat16", attention_backend="torch", weight_format="w12")
    # 17 linear layers. Their random weights (a few thousand each) sit near the escape-rate
    # threshold, so a draw may keep some bf16 (on the H200, torch 2.11, 15 of 17 were converted,
    # session 35): each kept layer's weight must really be over it, as encode_auto says
    report = eng.runner.w12_report
    assert report["converted"] + report["kept"] == 17 and report["converted"] >= 1
    modules = dict(eng.runner.model.named_modules())
    for name, how in report["layers"].items():
        if not how.startswith("w12"):
            assert how == "kept: escape rate above threshold", (name, how)
            assert encode_auto(modules[name].weight.detach())[0] is None, name
    p = prof.profile_engine(eng, 2, 12, steps=2, warmup=1,
                            rates=prof.measure_rates("cpu", 1 << 16, 32, reps=1))
    shape, step = TargetShape.from_config(TINY_HYBRID), Step(2, 12, weight_format="w12")
    assert set(p.ar.components_ms) == {c.name for c in step_costs(shape, None, step)}
    assert "linear weights W12" in render(build_report(shape, None, step, p.rates, p))


@pytest.mark.interpreter
def test_profile_graph_pass_on_cpu(tmp_path, monkeypatch):
    """The graph pass over the graph objects' eager twins (the CPU has no capture; the Triton
    kernels run in the interpreter): ar's DECODE graph and stock's whole-step graph are what the
    steps run, every label of their components is a counted component, and the report takes its
    measured columns and host gap from that pass. With PDL reported supported on the device (the
    model runner then turns it on; CPU launches never use it, so only the note changes) the
    report says its component times overlap."""
    from specpilot.kernels import pdl

    monkeypatch.setattr(pdl, "ENABLED", pdl.ENABLED)   # restored after the test
    monkeypatch.setattr(pdl, "supported", lambda device: True)
    dirs = _tiny_config_dirs(tmp_path)
    eng = prof.build_engine(dirs["t"], dirs["d"], 2, 12, 4, 2.5, 40, device="cpu",
                            dtype="float32", attention_backend="triton")
    eng.runner.enable_cuda_graphs(2, capture=False)
    eng.worker.enable_cuda_graphs(2, capture=False)
    runs = []
    sg = eng.worker.step_graphs
    run = sg.run
    sg.run = lambda *a: runs.append(len(a[0])) or run(*a)
    lagged = []
    launch_lagged = eng.worker.launch_lagged
    eng.worker.launch_lagged = lambda *a: lagged.append(1) or launch_lagged(*a)
    p = prof.profile_engine(eng, 2, 12, steps=2, warmup=1,
                            rates=prof.measure_rates("cpu", 1 << 16, 32, reps=1))
    assert runs  # the stock steps of the graph passes went through the step graph
    # pass 7: both engines timed under the overlap scheduler, stock's steps queued behind
    # unread ones; its run ends with a step in flight, which is aborted and dropped
    assert p.ar.overlap_ms > 0 and p.spec.overlap_ms > 0 and lagged
    from specpilot.scheduler.scheduler import Scheduler
    sched = Scheduler(eng.worker, None, 2, 8192, 16384, overlap=True)
    assert prof.overlapped_steps(sched, 2, 12, 3, 1, prof.clock_for(eng.runner.device)) > 0
    assert sched.is_idle() and sched.alloc.used_tokens == 0
    shape = TargetShape.from_config(TINY_HYBRID)
    dc = eng.worker.drafter.dc
    for sp, d in ((p.ar, None), (p.spec, dc)):
        step = Step.for_engine(d, 2, 12, 4, 2.5)
        assert set(sp.graph_components_ms) == {c.name for c in step_costs(shape, d, step)}
        assert sp.graph_ms > 0 and sp.measured_ms is sp.graph_components_ms
        # the host gap of the overlapped step (pass 7), as the engines serve; the plain one beside
        assert sp.overlap_host_gap_ms == sp.overlap_ms - sum(sp.graph_components_ms.values())
        assert sp.host_gap_ms == max(0.0, sp.overlap_host_gap_ms)
        assert sp.graph_host_gap_ms == sp.graph_ms - sum(sp.graph_components_ms.values())
        # eager twins: the spans were not event nodes, nothing calibrated, nothing removed
        assert sp.span_calibration is None and sp.event_nodes_ms is None
        assert sp.graph_spans["lm_head"] == 1 and set(sp.graph_raw_ms) < set(sp.graph_components_ms)
        # "other": the graph time its leaves leave over (clamped at 0: the CPU interpreter's
        # times differ between the two passes by more than the small ops they would show)
        assert sp.graph_components_ms["other"] >= 0 and 0 < sp.graph_gpu_ms < sp.graph_ms
    assert eng.worker.step_graphs is sg and eng.runner.graphs is not None  # restored
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in eng.runner.model.modules())
    rep = build_report(shape, dc, Step.for_engine(dc, 2, 12, 4, 2.5), p.rates, p, ("t", "d"))
    text = render(rep)
    assert "inside the CUDA graphs" in text and "with CUDA graphs" in text
    assert f"({p.ar.overlap_ms:.2f} overlapped)" in text
    assert "host gap = overlapped graph wall" in text
    assert f"; overlapped {max(0.0, p.spec.overlap_host_gap_ms):.2f})" in text
    assert "not captured: uncorrected" in text and "span calibration" not in text
    assert "host phases" not in text  # pass 6 runs only where graphs are captured
    assert text.count("PDL on: a kernel launches before the one ahead of it ends") == 2
    p.ar.host_phases_ms = {"process results": 0.25, "graph inputs": 0.5, prof.IN_GRAPH: 0.125}
    p.ar.host_phase_wall_ms = 9.0
    names = set(p.spec.graph_components_ms)  # the kernels of every component, as pass 5 gives
    p.spec.kernel_stats = {"kernels_per_replay": 9, "matched_per_replay": 7,
                           "position_matched_per_replay": 1, "eager_kernels": 9,
                           "unattributed_ms": 0.002, "by_position": {"gemm_v2": 0.004},
                           "top_kernels": {**{n: {f"kern_{n}": [0.5, 2.0]} for n in names},
                                           "unattributed": {"odd_kernel": [0.002, 1.0]}}}
    rep = build_report(shape, dc, Step.for_engine(dc, 2, 12, 4, 2.5), p.rates, p)
    text = render(rep)
    assert ("kernel profile (stock): 9 kernels per step, 7 matched by name and 1 by position to "
            "the eager run's 9; unattributed 0.002 ms\n  matched by position: gemm_v2 4.0 us\n"
            "  unattributed: odd_kernel 2.0 us") in text
    first = next(n for n in rep["largest_gaps"] if n in names)
    assert f"     kernels: kern_{first} 0.500 ms (2x)" in text
    assert ("host phases (ar): GPU idle per step while the host ran graph inputs 0.500, process "
            "results 0.250 ms; idle inside graphs 0.125 ms (under the profiler: wall 9.00 ms "
            f"against {p.ar.graph_ms:.2f} without)") in text


def _ev(name, start, end, cid=0, device=False, thread=1, linked=0):
    """A stand-in for torch.profiler's FunctionEvent with the fields pass 5 reads."""
    from types import SimpleNamespace

    return SimpleNamespace(name=name, id=cid, linked_correlation_id=linked, thread=thread,
                           device_type=SimpleNamespace(name="CUDA" if device else "CPU"),
                           time_range=SimpleNamespace(start=start, end=end))


def test_launch_labels_innermost_range_of_the_launch():
    p = prof.LABEL_PREFIX
    events = [
        _ev(p + "other", 0, 100), _ev(p + "lm_head", 60, 80),  # nested: the inner one wins
        _ev(p + "attn.qkv", 10, 20, thread=2),  # another thread: not around thread 1's launches
        _ev("cudaLaunchKernel", 12, 13, cid=7), _ev("cuLaunchKernel", 65, 66, cid=8),
        _ev("cudaLaunchKernel", 150, 151, cid=9),  # outside every range
        _ev("aten::mm", 30, 40, cid=50),  # an op a kernel is linked to (no runtime event)
        _ev("gemm_kernel", 200, 210, cid=7, device=True),
        _ev("triton_head", 220, 230, cid=8, device=True),
        _ev("memset", 240, 241, cid=9, device=True),
        _ev("linked_only", 250, 255, cid=99, device=True, linked=50),
        _ev("linked_to_range", 260, 261, cid=98, device=True, linked=61),
    ]
    events[1].id = 61  # a kernel with no runtime event, linked to the lm_head range itself
    assert prof.launch_labels(events) == [("gemm_kernel", "other"), ("triton_head", "lm_head"),
                                          ("memset", "other"), ("linked_only", "other"),
                                          ("linked_to_range", "lm_head")]
    events[2].thread = 1  # now attn.qkv [10, 20] on the launching thread covers cid 7
    assert prof.launch_labels(events)[0] == ("gemm_kernel", "attn.qkv")


def test_replay_kernels_split_and_attribution():
    ev = [_ev(n, t, t + d * 1e3, cid=c, device=True) for n, t, d, c in (
        ("a", 0, 1.0, 5), ("b", 2000, 2.0, 5), ("c", 5000, 0.5, 5),
        ("a", 9000, 1.5, 6), ("b", 11000, 2.5, 6), ("x", 14000, 0.25, 6), ("c", 15000, 0.5, 6))]
    runs = prof.replay_kernels(ev, 2)  # two graph launches: grouped by correlation id
    assert [[n for n, _ in r] for r in runs] == [["a", "b", "c"], ["a", "b", "x", "c"]]
    assert runs[1][1] == ("b", pytest.approx(2.5))
    for e in ev:
        e.id = 0  # no usable ids: equal chunks when they divide, else an error
    assert [len(r) for r in prof.replay_kernels(ev[:6], 2)] == [3, 3]
    with pytest.raises(ValueError, match="do not split into 2 replays"):
        prof.replay_kernels(ev, 2)
    labelled = [("a", "attn.qkv"), ("b", "lm_head"), ("c", "other")]
    per, st = prof.attribute_kernels(labelled, runs)
    assert per["attn.qkv"] == pytest.approx(1.25) and per["lm_head"] == pytest.approx(2.25)
    assert per["other"] == pytest.approx(0.5) and per["unattributed"] == pytest.approx(0.125)
    assert st == {"kernels_per_replay": 3.5, "matched_per_replay": 3,
                  "position_matched_per_replay": 0, "eager_kernels": 3,
                  "unattributed_ms": pytest.approx(0.125), "by_position": {},
                  "top_kernels": {"attn.qkv": {"a": [pytest.approx(1.25), 1]},
                                  "lm_head": {"b": [pytest.approx(2.25), 1]},
                                  "other": {"c": [pytest.approx(0.5), 1]},
                                  "unattributed": {"x": [pytest.approx(0.125), 0.5]}}}


def test_attribution_by_position():
    """Where the replay runs another kernel at one place (another GEMM variant under capture),
    it takes the eager kernel's label by position; a stretch of other length takes the label
    all its eager kernels share, else stays unattributed and is named."""
    labelled = [("a", "attn.qkv"), ("g1", "lm_head"), ("c", "other"), ("m1", "attn.o"),
                ("m2", "attn.o"), ("d", "other"), ("p", "attn.qkv"), ("q", "lm_head"),
                ("e", "other")]
    rep = [("a", 1.0), ("g2", 2.0), ("c", 0.5), ("mm", 3.0), ("d", 0.5), ("r", 4.0), ("e", 0.5)]
    per, st = prof.attribute_kernels(labelled, [rep])
    assert per["lm_head"] == pytest.approx(2.0) and per["attn.o"] == pytest.approx(3.0)
    assert per["unattributed"] == pytest.approx(4.0) and per["attn.qkv"] == pytest.approx(1.0)
    assert st["matched_per_replay"] == 4 and st["position_matched_per_replay"] == 2
    assert st["by_position"] == {"mm": pytest.approx(3.0), "g2": pytest.approx(2.0)}
    assert st["top_kernels"]["unattributed"] == {"r": [pytest.approx(4.0), 1]}
    assert st["top_kernels"]["attn.o"] == {"mm": [pytest.approx(3.0), 1]}
    assert st["top_kernels"]["other"] == {"c": [0.5, 1], "d": [0.5, 1], "e": [0.5, 1]}


def test_idle_by_phase_charges_the_innermost_host_phase():
    """Pass 6 on a synthetic two-step trace (us): each GPU-idle stretch goes to the innermost
    host phase open meanwhile, split at phase boundaries; idle between two kernels of one graph
    replay (same correlation id) is reported apart; time between steps has no phase."""
    p = prof.PHASE_PREFIX
    events = [_ev(p + n, a, b) for n, a, b in (
        ("scheduler step", 0, 1000), ("schedule", 10, 60), ("worker forward", 100, 900),
        ("graph inputs", 110, 300), ("graph launch", 250, 290), ("sample + copy", 300, 880),
        ("process results", 910, 990), ("scheduler step", 1100, 1500),
        ("process results", 1400, 1490))]
    events += [_ev(n, a, b, cid=c, device=True) for n, a, b, c in (
        ("copy", 150, 160, 1), ("g1", 280, 500, 2), ("g2", 520, 700, 2), ("argmax", 720, 730, 3),
        ("memcpy", 740, 745, 4), ("next", 1200, 1300, 5))]
    events.append(_ev("aten::add", 0, 1500))  # not a phase: ignored
    got = prof.idle_by_phase(events, steps=2)
    want = {"scheduler step": 280, "schedule": 50, "worker forward": 30, "graph inputs": 130,
            "graph launch": 30, "sample + copy": 165, "process results": 170,
            prof.NO_PHASE: 100, prof.IN_GRAPH: 20}
    assert got == pytest.approx({k: v / 2e3 for k, v in want.items()})
    assert sum(got.values()) == pytest.approx((1500 - 525) / 2e3)  # window less busy time
    with pytest.raises(ValueError, match="no host phase"):
        prof.idle_by_phase(events[-7:], steps=2)


@pytest.mark.interpreter
def test_host_phase_pass_on_cpu(tmp_path):
    """Pass 6's wiring over the graph objects' eager twins: the CPU runs no device activities, so
    every step's time is 'idle' and lands on the host phases; they are all there, add up to the
    steps, and the engine is left unwrapped."""
    dirs = _tiny_config_dirs(tmp_path)
    eng = prof.build_engine(dirs["t"], dirs["d"], 1, 12, 4, 2.5, 40, device="cpu",
                            dtype="float32", attention_backend="triton")
    eng.runner.enable_cuda_graphs(1, capture=False)
    eng.worker.enable_cuda_graphs(1, capture=False)
    from specpilot.scheduler.scheduler import Scheduler

    for worker, sample in ((eng.runner, {"sample + copy"}), (eng.worker, set())):
        sched = Scheduler(worker, None, 1, 8192, 16384)
        got, wall = prof.host_phase_pass(sched, worker, 1, 12, 3, 1, prof.HostClock())
        assert {"scheduler step", "schedule", "worker batch", "worker forward", "graph inputs",
                "graph launch", "process results"} | sample <= set(got)
        assert 0.5 * wall < sum(got.values()) - got.get(prof.NO_PHASE, 0) < 2 * wall
        assert not {"step", "_schedule_decode", "_process"} & set(vars(sched))
        assert not {"forward", "_sample"} & set(vars(worker))
        for g in prof.step_graphs(worker):
            assert not {"run", "_launch"} & set(vars(g))


def test_kernel_labels_are_profiler_ranges(tmp_path):
    """Pass 5's labelling half on the CPU: instrument() with KernelLabels puts every component
    of an eager step as a named record_function range into a real torch.profiler trace, nested
    as the spans are (a projection inside its layer), and leaves the engine as it was."""
    from torch.profiler import ProfilerActivity, profile

    from specpilot.core import SamplingParams

    dirs = _tiny_config_dirs(tmp_path)
    eng = prof.build_engine(dirs["t"], None, 1, 12, None, None, 8, device="cpu",
                            dtype="float32", attention_backend="torch")
    ids = torch.randint(10, 200, (1, 12)).tolist()
    labels = prof.KernelLabels()
    with prof.instrument(labels, eng.runner), profile(activities=[ProfilerActivity.CPU]) as p:
        labels.active = True
        eng.generate(ids, SamplingParams(max_new_tokens=2, temperature=0))
        labels.active = False
    names = [e for e in p.events() if e.name.startswith(prof.LABEL_PREFIX)]
    got = {e.name[len(prof.LABEL_PREFIX):] for e in names}
    assert {"other", "gdn.in_proj", "gdn.recurrent", "lm_head", "attention[full]"} <= got
    outer = next(e for e in names if e.name.endswith(":gdn.recurrent"))
    inner = [e for e in names if e.name.endswith(":gdn.in_proj")
             and outer.time_range.start <= e.time_range.start <= outer.time_range.end]
    assert inner and labels._ranges == []
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in eng.runner.model.modules())


@pytest.mark.gpu
def test_kernel_pass_on_gpu(tmp_path):
    """Passes 5 and 6 on captured graphs: every replayed kernel is matched to the eager run, the
    in-graph times come from it, and the host gap is split into host phases (the report says
    so)."""
    dirs = _tiny_config_dirs(tmp_path)
    eng = prof.build_engine(dirs["t"], dirs["d"], 2, 12, 4, 2.5, 40)
    p = prof.profile_engine(eng, 2, 12, steps=2, warmup=1)
    shape = TargetShape.from_config(TINY_HYBRID)
    for sp in (p.ar, p.spec):
        k = sp.kernel_stats
        assert k is not None and k["kernels_per_replay"] > 10
        assert k["kernels_per_replay"] <= k["eager_kernels"]
        assert k["matched_per_replay"] + k["position_matched_per_replay"] == k["kernels_per_replay"]
        assert k["unattributed_ms"] == 0 and k["matched_per_replay"] > 0.9 * k["kernels_per_replay"]
        assert sp.graph_components_ms["lm_head"] > 0 and sp.span_components_ms is not None
        ph = sp.host_phases_ms  # pass 6: the GPU idles at least while results are processed
        assert ph["process results"] > 0 and sum(ph.values()) < sp.host_phase_wall_ms
    dc = eng.worker.drafter.dc
    text = render(build_report(shape, dc, Step.for_engine(dc, 2, 12, 4, 2.5), p.rates, p))
    assert "from a kernel profile of their replays" in text and "kernel profile (stock)" in text
    assert "host phases (ar): GPU idle per step while the host ran" in text
