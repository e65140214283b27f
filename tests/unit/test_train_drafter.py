"""specpilot.train_drafter on a tiny random Llama target (CPU, fp32, no ../shared needed).

The target folder gets a character-level tokenizer with a ChatML template so the whole CLI path
(prompt files -> chat template -> generation -> training -> export) runs; the data directory is
a few inline rows in the layout of ../shared/data/evals.
"""

import json
import os

import pytest
import torch
from safetensors import safe_open

from specpilot.evals.datasets import STEP_BY_STEP
from specpilot.train_drafter import data, evaluate, prompts, train
from specpilot.train_drafter.batching import IGNORE, make_batch
from specpilot.train_drafter.model import (block_hidden, block_loss, drafter_config, forward_loss,
                                           lr_at, new_drafter, target_features, target_logits)
from tests.e2e.tiny_models import make_tiny

CHARS = [chr(c) for c in range(32, 127)] + ["\n"]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>", "<reserved_0>"]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
COMMON = ["--block-size", "4", "--layers", "1", "--max-new-tokens", "24", "--max-len", "200",
          "--batch-size", "4", "--blocks-per-seq", "4", "--save-dtype", "float32",
          "--device", "cpu", "--warmup", "2", "--lr", "3e-3", "--log-every", "100"]


def char_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL + CHARS)}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tk.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|im_start|>",
                                   eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   unk_token="<unk>", additional_special_tokens=["<reserved_0>"],
                                   chat_template=TEMPLATE)


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    path = make_tiny("llama", tmp_path_factory.mktemp("target"), max_position_embeddings=512)
    char_tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("evals")
    gsm = [{"question": q, "answer": "#### 1"} for q in ("2+3?", "7*6?", "9-4?", "8/2?")]
    mbpp = [{"text": f"Add {i}.", "code": "", "task_id": i, "test_setup_code": "",
             "test_list": [f"assert f({i})"], "challenge_test_list": []} for i in (1, 11, 600)]
    for name, rows in (("gsm8k_test.jsonl", gsm), ("mbpp.jsonl", mbpp)):
        (d / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(d)


def run_cli(target, data_dir, out, work, *extra):
    assert train.main(["--target", target, "--data-dir", data_dir, "--out", str(out),
                       "--work-dir", str(work), *COMMON, *extra]) == 0
    with open(os.path.join(out, "train_log.jsonl")) as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def trained(target, data_dir, tmp_path_factory):
    base = tmp_path_factory.mktemp("run")
    log = run_cli(target, data_dir, base / "a", base / "work", "--steps", "8")
    return base, log


def test_split_rules(data_dir):
    items, info = prompts.training_prompts(data_dir, synthetic=3)
    ids = sorted(it["id"] for it in items)
    assert ids == ["gsm8k/0", "gsm8k/1", "mbpp/1", "mbpp/600", "synthetic/0", "synthetic/1",
                   "synthetic/2"]
    assert info["sources"]["gsm8k"]["used_rows"] == "0-1"
    held = prompts.eval_prompts(data_dir, "gsm8k-heldout")
    assert [it["id"] for it in held] == ["gsm8k/2", "gsm8k/3"]
    assert [it["id"] for it in prompts.eval_prompts(data_dir, "mbpp-test")] == ["mbpp/11"]
    with pytest.raises(ValueError, match="held out"):
        prompts.training_prompts(data_dir, sources=("humaneval",))


def test_cli_exports_public_dflash_layout(trained, target):
    base, log = trained
    out = base / "a"
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["DFlashDraftModel"] and cfg["model_type"] == "qwen3"
    assert cfg["block_size"] == 4 and cfg["num_target_layers"] == 3
    dfc = cfg["dflash_config"]
    assert dfc["block_size"] == 4 and dfc["target_layer_ids"] == [1]
    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        names = set(f.keys())
    assert {"fc.weight", "hidden_norm.weight", "norm.weight",
            "layers.0.self_attn.q_proj.weight", "layers.0.mlp.down_proj.weight"} <= names
    assert not any("embed" in n or "lm_head" in n or "rotary" in n for n in names)
    meta = json.loads((out / "train_meta.json").read_text())
    assert "first half" in meta["data"]["split"]["gsm8k"]
    assert meta["mask_token"]["id"] == dfc["mask_token_id"] >= 101  # first row past the tokenizer
    seqs = data.read_caches(meta["data"]["cache_dir"], meta["data"]["settings_key"])
    assert len(seqs) == 4 and all(dfc["mask_token_id"] not in c for c in seqs.values())
    assert {k for _, k in seqs} == {0}
    assert len(log) == 8 and meta["training"]["step"] == 8


def test_export_loads_and_stock_is_lossless(trained, target):
    from specpilot.config import ServerArgs
    from specpilot.core import SamplingParams
    from specpilot.models.loader import build_model
    from specpilot.offline import OfflineEngine
    from specpilot.spec.draft_loader import load_drafter

    out = str(trained[0] / "a")
    model, _ = build_model(target, torch.float32, torch.device("cpu"), 512)
    drafter = load_drafter(out, model, torch.float32, torch.device("cpu"), 512)
    assert drafter.dc.block_size == 4 and drafter.dc.algorithm == "DFLASH"
    ps = [[1, 10, 20, 30, 2, 100, 1, 70], [1, 50, 60], list(range(5, 40))]
    sp = SamplingParams(temperature=0, max_new_tokens=24, ignore_eos=True)
    common = dict(model_path=target, device="cpu", max_total_tokens=1024)
    ref = OfflineEngine(ServerArgs(**common)).generate(ps, sp)
    outs = OfflineEngine(ServerArgs(**common, speculative_draft_model_path=out)).generate(ps, sp)
    assert [o.output_ids for o in outs] == [r.output_ids for r in ref]
    assert all(o.meta["spec_verify_ct"] >= 1 for o in outs)


def test_resume_continues_exactly(trained, target, data_dir):
    base, straight = trained
    run_cli(target, data_dir, base / "b", base / "work", "--steps", "8", "--stop-at-step", "4")
    assert json.loads((base / "b" / "train_meta.json").read_text())["training"]["step"] == 4
    resumed = run_cli(target, data_dir, base / "b", base / "work", "--steps", "8",
                      "--resume", str(base / "b"))
    assert [r["step"] for r in resumed] == list(range(1, 9))
    for a, b in zip(straight, resumed):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-6), (a, b)
    os.remove(base / "b" / "trainer_state.pt")  # warm start from the export alone
    run_cli(target, data_dir, base / "c", base / "work", "--steps", "2",
            "--resume", str(base / "b"))
    assert json.loads((base / "c" / "train_meta.json").read_text())["resumed_from"]


def test_evaluate_cli(trained, target, data_dir, tmp_path, capsys):
    out = tmp_path / "eval.json"
    from specpilot import offline

    built = []
    engine = offline.OfflineEngine
    with pytest.MonkeyPatch.context() as mp:  # the engines' pool: for --max-running requests
        mp.setattr(offline, "OfflineEngine", lambda args: built.append(args) or engine(args))
        assert evaluate.main(["--target", target, "--drafter", str(trained[0] / "a"),
                              "--data-dir", data_dir, "--split", "gsm8k-heldout,mbpp-test",
                              "--limit", "2", "--max-new-tokens", "12", "--device", "cpu",
                              "--max-running", "1", "--json", str(out)]) == 0
    assert [b.max_running_requests for b in built] == [1, 1]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(target)
    longest = max(len(p) for sp in ("gsm8k-heldout", "mbpp-test") for p in prompts.render_many(
        tok, [it["prompt"] for it in prompts.eval_prompts(data_dir, sp, 2)]))
    block = json.loads((trained[0] / "a" / "config.json").read_text())["block_size"]
    assert built[0].max_total_tokens == longest + 12 + 2 * block + 1024  # one request's room
    res = json.loads(out.read_text())["results"]
    assert res["gsm8k-heldout"]["n"] == 2 and res["mbpp-test"]["n"] == 1
    for r in res.values():
        assert r["match"] == r["n"] and r["tau"] >= 1.0
    assert "gsm8k-heldout" in capsys.readouterr().out


@pytest.fixture(scope="module")
def hf_target(target):
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    return m.requires_grad_(False)


def tiny_drafter(hf_target, layers=2, block=4):
    cfg = drafter_config(hf_target.config, layers, block, 200, [0, 2])
    return new_drafter(cfg, hf_target, 128, seed=3)


def test_block_sees_context_strictly_before_its_anchor(hf_target):
    d = tiny_drafter(hf_target)
    torch.manual_seed(0)
    feats = torch.randn(1, 20, 128)
    anchors = torch.tensor([[6, 11]])
    ids = torch.full((1, 2, 4), 200)
    ids[0, :, 0] = torch.tensor([40, 41])
    with torch.no_grad():
        ref = block_hidden(d, feats, ids, anchors)

        def changed(p):
            f = feats.clone()
            f[0, p] += 3.0
            h = block_hidden(d, f, ids, anchors)
            return [not torch.allclose(h[0, k], ref[0, k], atol=1e-6) for k in range(2)]

        assert changed(slice(11, 20)) == [False, False]  # at/after both anchors: invisible
        assert changed(10) == [False, True]  # before anchor 11 only
        assert changed(6) == [False, True]  # the anchor's own feature is not visible to it
        assert changed(5) == [True, True]
        other = ids.clone()
        other[0, 0, 0] = 90  # blocks do not see each other
        h = block_hidden(d, feats, other, anchors)
        assert torch.allclose(h[0, 1], ref[0, 1], atol=1e-6)
        assert not torch.allclose(h[0, 0], ref[0, 0], atol=1e-6)


class DenseBackend:
    """Minimal DraftAttentionBackend: one request, context K/V stored in order, block dense."""

    def __init__(self):
        self.kv = {}

    def store(self, layer_id, k, v):
        self.kv[layer_id] = (k, v)

    def attend(self, q, k, v, layer_id, scale, causal, window):
        assert not causal and window is None
        ck, cv = self.kv[layer_id]
        kk, vv = torch.cat([ck, k]).transpose(0, 1), torch.cat([cv, v]).transpose(0, 1)
        o = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(0, 1), kk, vv, scale=scale, enable_gqa=q.shape[1] != k.shape[1])
        return o.transpose(0, 1)


def test_training_forward_equals_inference_path(hf_target):
    d = tiny_drafter(hf_target)
    torch.manual_seed(1)
    feats = torch.randn(1, 30, 128)
    anchors = torch.tensor([[9, 17, 25]])
    ids = torch.full((1, 3, 4), 200)
    ids[0, :, 0] = torch.tensor([33, 44, 55])
    with torch.no_grad():
        train_h = block_hidden(d, feats, ids, anchors)
        for k, a in enumerate(anchors[0].tolist()):
            be = DenseBackend()
            d.store_context(feats[0, :a], torch.arange(a), be)
            inf_h = d(ids[0, k][None], torch.arange(a, a + 4)[None], be)
            torch.testing.assert_close(train_h[0, k], inf_h[0], atol=1e-5, rtol=1e-5)


def test_make_batch_labels_and_anchors():
    samples = [{"ids": list(range(10, 40)), "prompt_len": 12},
               {"ids": list(range(50, 66)), "prompt_len": 13}]
    b = make_batch(samples, [0, 1], 4, 3, 7, torch.Generator().manual_seed(0))
    for n, s in enumerate(samples):
        for k in range(3):
            a = int(b.anchors[n, k])
            assert s["prompt_len"] <= a <= len(s["ids"]) - 2
            assert b.block_ids[n, k].tolist() == [s["ids"][a], 7, 7, 7]
            assert b.labels[n, k, 0] == IGNORE
    # sequence 1 has 2 anchor candidates (13, 14) for 3 blocks: the repeat is unlabelled
    assert sorted(b.anchors[1, :2].tolist()) == [13, 14] and (b.labels[1, 2] == IGNORE).all()
    a = int(b.anchors[1, 0])
    want = [IGNORE] + [samples[1]["ids"][a + j] if a + j < 16 else IGNORE for j in (1, 2, 3)]
    assert b.labels[1, 0].tolist() == want


def test_overfit_fixed_batch(hf_target):
    d = tiny_drafter(hf_target, layers=1)
    g = torch.Generator().manual_seed(0)
    seqs = [{"ids": torch.randint(3, 250, (40,), generator=g).tolist(), "prompt_len": 8}
            for _ in range(2)]
    batch = make_batch(seqs, [0, 1], 4, 6, 200, g)
    opt = torch.optim.AdamW(d.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        loss, m = forward_loss(d, hf_target, batch, gamma=4.0, autocast=False)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(m["loss"])
    assert losses[-1] < 0.3 * losses[0], losses[::5]


def test_loss_weights_and_metrics(hf_target):
    d = tiny_drafter(hf_target, layers=1)
    hidden = torch.randn(1, 1, 4, 64)
    labels = torch.tensor([[[IGNORE, 5, 6, IGNORE]]])
    loss, m = block_loss(d, hidden, labels, gamma=1.0)
    ce = torch.nn.functional.cross_entropy(d.logits(hidden[0, 0, 1:3]), labels[0, 0, 1:3],
                                           reduction="none")
    w = torch.tensor([1.0, torch.exp(torch.tensor(-1.0))])
    assert float(loss) == pytest.approx(float((ce * w).sum() / w.sum()), rel=1e-5)
    assert 1.0 <= m["tau_est"] <= 3.0


def test_teacher_logits_are_the_targets_next_token_logits(hf_target):
    """target_logits gives, for every labelled row (anchor + j), the target's own logits after
    ids[.. anchor + j - 1]; on the target's greedy continuation their argmax is the data token."""
    d = tiny_drafter(hf_target, layers=1)
    prompt = torch.tensor([[1, 40, 52, 61, 70, 44, 2]])
    ids = hf_target.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=30,
                             do_sample=False, pad_token_id=0, eos_token_id=None)
    assert ids.shape[1] == 37
    seq = {"ids": ids[0].tolist(), "prompt_len": 7}
    batch = make_batch([seq], [0], 4, 6, 200, torch.Generator().manual_seed(0))
    feats, final = target_features(hf_target, batch.input_ids, batch.attention_mask, [0, 2],
                                   final=True)
    teacher = target_logits(d, final, batch.anchors, batch.labels)
    full = hf_target(ids).logits[0]  # [L, V]: row p predicts token p + 1
    sel = batch.labels != IGNORE
    pos = (batch.anchors[:, :, None] + torch.arange(4))[sel]
    assert teacher.shape == (int(sel.sum()), full.shape[-1]) and len(pos) > 10
    torch.testing.assert_close(teacher, full[pos - 1], atol=1e-4, rtol=1e-4)
    assert teacher.argmax(-1).tolist() == batch.labels[sel].tolist()  # greedy data


def test_distill_losses(hf_target):
    d = tiny_drafter(hf_target, layers=1)
    torch.manual_seed(2)
    hidden = torch.randn(1, 1, 4, 64)
    labels = torch.tensor([[[IGNORE, 5, 6, 7]]])
    teacher = torch.randn(3, 256) * 3
    w = torch.exp(-torch.arange(3.0))
    # argmax: the data labels are replaced by the teacher's greedy tokens
    loss, m = block_loss(d, hidden, labels, 1.0, teacher, "argmax")
    ce = torch.nn.functional.cross_entropy(d.logits(hidden[0, 0, 1:]), teacher.argmax(-1),
                                           reduction="none")
    assert float(loss) == pytest.approx(float((ce * w).sum() / w.sum()), rel=1e-5)
    # kl: KL(teacher || drafter) per row, same weights; 0 when the drafter equals the teacher
    loss, m = block_loss(d, hidden, labels, 1.0, teacher, "kl")
    lt = torch.log_softmax(teacher, -1)
    kl = (lt.exp() * (lt - torch.log_softmax(d.logits(hidden[0, 0, 1:]), -1))).sum(-1)
    assert float(loss) == pytest.approx(float((kl * w).sum() / w.sum()), rel=1e-5)
    own = d.logits(hidden[0, 0, 1:]).detach()
    loss, m = block_loss(d, hidden, labels, 1.0, own, "kl")
    assert abs(float(loss)) < 1e-5 and m["acc"] == 1.0 and m["tau_est"] == 4.0
    with pytest.raises(ValueError, match="needs the target's logits"):
        block_loss(d, hidden, labels, 1.0, None, "kl")


@pytest.mark.parametrize("distill", ["argmax", "kl"])
def test_distill_trains_on_sampled_text(hf_target, distill):
    """Sampled text, target-made labels: a fixed batch is fitted (the loss falls) and the
    metrics are measured against the target's greedy tokens, not the sampled ones."""
    d = tiny_drafter(hf_target, layers=1)
    torch.manual_seed(5)
    prompt = torch.tensor([[1, 40, 52, 61, 70, 44, 2]])
    ids = hf_target.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=40,
                             do_sample=True, temperature=2.0, pad_token_id=0, eos_token_id=None)
    seq = {"ids": ids[0].tolist(), "prompt_len": 7}
    batch = make_batch([seq], [0], 4, 8, 200, torch.Generator().manual_seed(0))
    opt = torch.optim.AdamW(d.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        loss, m = forward_loss(d, hf_target, batch, gamma=4.0, autocast=False, distill=distill)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(m["loss"])
    assert losses[-1] < 0.5 * losses[0], losses[::5]
    _, m_data = forward_loss(d, hf_target, batch, 4.0, False, "none")
    assert m["acc"] > m_data["acc"]  # it learnt the target's choices, which the draws are not


def test_cli_distill(target, data_dir, tmp_path):
    log = run_cli(target, data_dir, tmp_path / "a", tmp_path / "work", "--steps", "3",
                  "--samples-per-prompt", "2", "--distill", "kl")
    meta = json.loads((tmp_path / "a" / "train_meta.json").read_text())["training"]
    assert meta["distill"] == "kl" and meta["step"] == 3 and len(log) == 3
    assert all(r["loss"] >= 0 for r in log)  # a KL divergence


def test_choose_mask_token():
    tok = char_tokenizer()
    emb = torch.ones(256, 8)
    assert data.choose_mask_token(tok, 256, set(), emb)[0] == 101
    used = set(range(101, 256))
    i, how = data.choose_mask_token(tok, 256, used, emb)
    assert i == 4 and "<reserved_0>" in how  # special, unused, not in the chat template
    emb[4] = 0  # an all-zero row is never chosen
    assert data.choose_mask_token(tok, 256, used, emb)[0] == 100  # highest id absent from data
    assert data.choose_mask_token(None, 256, {255}, emb)[0] == 254


def test_lr_schedule():
    assert lr_at(0, 100, 1.0, 10) == pytest.approx(0.1)
    assert lr_at(9, 100, 1.0, 10) == pytest.approx(1.0)
    assert lr_at(100, 100, 1.0, 10) == pytest.approx(0.1)
    assert lr_at(55, 100, 1.0, 10, "linear", 0.0) == pytest.approx(0.5)
    assert lr_at(500, 0, 1.0, 10) == 1.0  # total unknown yet
    assert lr_at(500, 0, 1.0, 10, progress=0.5) == pytest.approx(0.55)  # time-bounded run
    assert lr_at(5, 0, 1.0, 10, progress=0.9) == pytest.approx(0.6)  # warm-up comes first
    assert lr_at(500, 0, 1.0, 10, progress=1.7) == pytest.approx(0.1)


@pytest.mark.parametrize("argv,msg", [
    (["--out", "x", "--steps", "1"], "no config.json"),
    (["--steps", "1", "--block-size", "1"], "--block-size"),
    ([], "--steps and/or --max-minutes"),
    (["--steps", "1", "--data-dir", "/nonexistent"], "not a folder"),
    (["--steps", "1", "--gen-shard", "0/2"], "--gen-shard needs --generate-only"),
    (["--generate-only", "--gen-shard", "2/2"], "need 0 <= I < N"),
    (["--generate-only", "--gen-shard", "a/b"], "must be I/N"),
    (["--steps", "1", "--gen-fraction", "1.5"], "--gen-fraction must be in [0, 1]"),
    (["--steps", "1", "--repeat", "gsm8k=0"], "--repeat must be SOURCE=N"),
    (["--steps", "1", "--gen-admit", "0"], "--gen-admit must be >= 1"),
    (["--steps", "1", "--repeat", "gsm8k"], "--repeat must be SOURCE=N"),
])
def test_cli_errors(target, data_dir, argv, msg, capsys):
    base = ["--target", "/nonexistent" if msg == "no config.json" else target, "--out", "o"]
    if "--data-dir" not in argv:
        base += ["--data-dir", data_dir]
    with pytest.raises(SystemExit):
        train.parse_args(base + argv)
    assert msg in capsys.readouterr().err


def test_gen_admit_default_is_an_eighth_of_the_batch(target, data_dir):
    base = ["--target", target, "--out", "o", "--data-dir", data_dir, "--steps", "1"]
    assert train.parse_args(base).gen_admit == 8  # --gen-batch-size 64
    assert train.parse_args(base + ["--gen-batch-size", "256"]).gen_admit == 32
    assert train.parse_args(base + ["--gen-batch-size", "4"]).gen_admit == 1
    assert train.parse_args(base + ["--gen-admit", "3"]).gen_admit == 3


def test_bf16_autocast_path(target):
    """The CUDA configuration (bf16 target, fp32 drafter under bf16 autocast), run on CPU."""
    from transformers import AutoModelForCausalLM

    t = AutoModelForCausalLM.from_pretrained(target, dtype=torch.bfloat16).eval()
    t.requires_grad_(False)
    d = new_drafter(drafter_config(t.config, 1, 4, 200, [1]), t, 128, seed=0)
    g = torch.Generator().manual_seed(0)
    seqs = [{"ids": torch.randint(3, 250, (30,), generator=g).tolist(), "prompt_len": 6}]
    loss, m = forward_loss(d, t, make_batch(seqs, [0], 4, 4, 200, g), 4.0, autocast=True)
    loss.backward()
    assert torch.isfinite(loss) and d.fc.weight.dtype == d.fc.weight.grad.dtype == torch.float32
    assert d.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0


def test_time_budget_stops_cleanly(target, data_dir, tmp_path):
    budget = 0.1  # minutes
    train.main(["--target", target, "--data-dir", data_dir, "--out", str(tmp_path / "o"),
                "--work-dir", str(tmp_path / "w"), *COMMON, "--max-minutes", str(budget)])
    meta = json.loads((tmp_path / "o" / "train_meta.json").read_text())["training"]
    assert meta["stop_reason"] == "time budget" and meta["step"] >= 10
    assert meta["elapsed_s"] < 60 * budget + 3
    # no step count was given: the learning rate decays over the time budget, not by steps
    assert meta["total_steps"] == 0 and meta["last"]["lr"] < 0.5 * 3e-3


def _cache_lines(work, key):
    out = []
    for path in data.cache_files(str(work), key):
        with open(path) as f:
            out += [json.loads(line) for line in f.read().splitlines()[1:] if line.endswith("}")]
    return out


def test_sampled_continuations(target, data_dir, tmp_path):
    """--samples-per-prompt 3: the greedy data plus 2 sampled continuations per prompt, cached
    under their own settings key; a second run reads the caches back instead of generating."""
    extra = ["--steps", "1", "--samples-per-prompt", "3", "--temperature", "1.5"]
    run_cli(target, data_dir, tmp_path / "a", tmp_path / "work", *extra)
    meta = json.loads((tmp_path / "a" / "train_meta.json").read_text())["data"]
    n = meta["prompts"] - meta["prompts_too_long"]
    s = meta["sampled"]
    assert s["per_prompt"] == 2 and s["temperature"] == 1.5
    assert s["sequences"] + s["dropped"]["too_short_or_long"] == 2 * n
    assert meta["sequences"] > s["sequences"]  # the greedy sequences are there too
    assert s["settings_key"] != meta["settings_key"]
    comps = _cache_lines(tmp_path / "work", s["settings_key"])
    greedy = _cache_lines(tmp_path / "work", meta["settings_key"])
    assert len(comps) == 2 * n and len(greedy) == n
    assert sorted(r["k"] for r in comps) == [0] * n + [1] * n
    assert len({tuple(r["completion"]) for r in comps} -
               {tuple(r["completion"]) for r in greedy}) > 0  # really sampled
    files = data.cache_files(str(tmp_path / "work"), s["settings_key"])
    before = [os.path.getmtime(f) for f in files]
    run_cli(target, data_dir, tmp_path / "b", tmp_path / "work", *extra)
    assert [os.path.getmtime(f) for f in files] == before  # read back, not generated again
    meta_b = json.loads((tmp_path / "b" / "train_meta.json").read_text())["data"]
    assert meta_b["data_key"] == meta["data_key"] and meta_b["sequences"] == meta["sequences"]


def test_cache_is_per_prompt_and_sharded(target, data_dir, tmp_path):
    """Generation split over two --generate-only shards writes two files, which a training run
    reads back together without generating; a larger prompt set (more --gsm8k-variants) then
    generates only its new prompts."""
    work = tmp_path / "work"
    base = ["--target", target, "--data-dir", data_dir, "--work-dir", str(work), *COMMON,
            "--gsm8k-variants", "2", "--generate-only"]
    for i in (0, 1):
        assert train.main([*base, "--out", str(tmp_path / f"g{i}"), "--gen-shard", f"{i}/2"]) == 0
    files = sorted(os.listdir(work))
    assert len(files) == 2 and files[0].endswith("-0of2.jsonl") and files[1].endswith("-1of2.jsonl")
    key = files[0][5:21]
    first = _cache_lines(work, key)
    assert len(first) == 2 + 2 + 2  # gsm8k rows 0-1, mbpp 1 and 600, 2 variants
    assert len({r["h"] for r in first}) == len(first)
    mtimes = [os.path.getmtime(work / f) for f in files]
    run_cli(target, data_dir, tmp_path / "t", work, "--steps", "1", "--gsm8k-variants", "2")
    assert [os.path.getmtime(work / f) for f in files] == mtimes and len(os.listdir(work)) == 2
    meta = json.loads((tmp_path / "t" / "train_meta.json").read_text())["data"]
    assert meta["sequences"] == 6 and meta["prompts_by_source"]["gsm8k-variant"] == 2
    run_cli(target, data_dir, tmp_path / "t0", work, "--steps", "1", "--gsm8k-variants", "4",
            "--gen-fraction", "0")  # caches only: the 2 new prompts are left out
    meta = json.loads((tmp_path / "t0" / "train_meta.json").read_text())["data"]
    assert meta["sequences"] == 6 and len(_cache_lines(work, key)) == len(first)
    killed = work / f"data-{key}.jsonl"  # the file this run appends to, left cut mid-line
    killed.write_text(json.dumps({"format": 2, "settings": key}) + '\n{"h": "00ab", "k": 0, "co')
    run_cli(target, data_dir, tmp_path / "t2", work, "--steps", "1", "--gsm8k-variants", "4")
    assert len(data.read_caches(str(work), key)) == len(first) + 2  # only the 2 new generated
    assert len(killed.read_text().splitlines()) == 4  # header, the cut line, 2 new records


def test_gsm8k_variants(data_dir, tmp_path):
    rng = __import__("random").Random(0)
    q = "Janet has 16 eggs and 1,250 coins; Bob gives Janet 16 more at 2.5% interest. Ann is 3."
    v = prompts.variant_question(q, rng)
    assert v != q and "Janet" not in v and "Bob" not in v and "Ann" not in v
    import re
    nums = re.findall(r"\d[\d,.]*%?", v)
    assert len(nums) == 5 and nums[0] == nums[2]  # 16 -> the same new number both times
    assert re.fullmatch(r"\d,\d{3}", nums[1]) and nums[3].endswith("%") and "." in nums[3]
    for text in ("1500%", "100%", "7%", "0.25", "1", "0", "3:00"):  # shapes, odd ones included
        for _ in range(20):
            out = prompts.variant_question(text, rng)
            assert len(out) == len(text) and ("%" in out) == ("%" in text)
            assert out == text if text in ("1500%", "100%", "1", "0") else out[0] != "0"
    items, info = prompts.gsm8k_variants(data_dir, 5)
    assert [it["id"] for it in items] == ["gsm8k-variant/0/0", "gsm8k-variant/1/0",
                                          "gsm8k-variant/0/1", "gsm8k-variant/1/1",
                                          "gsm8k-variant/0/2"]
    from specpilot.evals.datasets import STEP_BY_STEP
    assert all(it["prompt"].endswith(STEP_BY_STEP) for it in items)
    assert items[:3] == prompts.gsm8k_variants(data_dir, 3)[0]  # prefix-stable
    assert info["from_rows"] == "0-1"  # the training half only
    held = [it["prompt"].split("\n")[0] for it in prompts.eval_prompts(data_dir, "gsm8k-heldout")]
    assert not any(it["prompt"].split("\n")[0] in held for it in items)
    all_items, info = prompts.training_prompts(data_dir, gsm8k_variants_n=4)
    assert info["prompts_by_source"]["gsm8k-variant"] == 4


def test_repeat_sources(trained, target, data_dir, tmp_path, capsys):
    seqs = [{"source": s, "ids": [i]} for i, s in enumerate(("a", "b", "a", "c"))]
    out = data.repeat_sources(seqs, {"a": 3, "c": 2})
    assert [x["ids"][0] for x in out] == [0, 0, 0, 1, 2, 2, 2, 3, 3]
    assert all(x is seqs[x["ids"][0]] for x in out)  # the same sequences, not copies
    with pytest.raises(ValueError, match=r"does not have: \['z'\]"):
        data.repeat_sources(seqs, {"z": 2})
    # through the CLI: the work dir's cached data, gsm8k shown twice per epoch
    base, _ = trained
    run_cli(target, data_dir, tmp_path / "d", base / "work", "--steps", "1", "--repeat",
            "gsm8k=2")
    info = json.loads((tmp_path / "d" / "train_meta.json").read_text())["data"]
    by = info["prompts_by_source"]
    assert info["repeat"] == {"sources": {"gsm8k": 2}, "sequences_per_epoch":
                              info["sequences"] + by["gsm8k"]}
    assert train.main(["--target", target, "--data-dir", data_dir, "--out", str(tmp_path / "e"),
                       "--work-dir", str(base / "work"), *COMMON, "--steps", "1", "--repeat",
                       "nope=2"]) == 2
    assert "does not have: ['nope']" in capsys.readouterr().err


def test_render_many_equals_render_one_by_one(target):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(target)
    texts = ["2+3?", "Anna and Ann share 7 apples.\n\nEach gets how many?", "  x  ", "é ü 漢字",
             "<|im_start|> not a turn", "def f(x):\n    return x"]
    one = [tok.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                   tokenize=True) for t in texts]
    one = [o["input_ids"] if hasattr(o, "keys") else o for o in one]
    assert prompts.render_many(tok, texts) == one == [prompts.render(tok, t) for t in texts]
    assert prompts.render_many(tok, []) == []


def test_variant_names_found_as_whole_words():
    import random

    q = "Anna gives Ann 3 apples; Annabel watches. Anna keeps 5."
    out = prompts.variant_question(q, random.Random(0))
    words = out.replace(";", " ").replace(".", " ").split()
    assert "Anna" not in words and "Ann" not in words and "Annabel" in words  # not a listed name
    assert words[0] == words[-3]  # both "Anna"s became the same name


def test_profile_steps_prints_a_table(trained, target, data_dir, tmp_path, capsys):
    base, _ = trained
    run_cli(target, data_dir, tmp_path / "p", base / "work", "--steps", "23", "--profile-steps",
            "2")
    out = capsys.readouterr()
    text = out.out + out.err
    assert "profile of 2 training steps" in text and "self_cpu_time_total" in text
    assert "aten::" in text.split("profile of 2 training steps")[1]
    # a run that ends inside the profiled steps prints what it profiled
    run_cli(target, data_dir, tmp_path / "q", base / "work", "--steps", "21", "--profile-steps",
            "5")
    out = capsys.readouterr()
    assert "profile of 1 training steps" in out.out + out.err


def test_duplicate_prompts_kept_once():
    items, info = prompts.training_prompts(None, (), synthetic=2400)
    texts = [it["prompt"] for it in items]
    assert info["duplicates_dropped"] > 0 and len(texts) == len(set(texts))
    assert len(texts) + info["duplicates_dropped"] == 2400 == sum(
        info["sources"]["synthetic"]["families"].values())


def test_grow_layers_starts_as_identity(trained, target, data_dir, tmp_path):
    """--grow-layers 1 on a 1-layer export: the 2-layer drafter's first step has exactly the
    1-layer drafter's loss, and the new layer trains."""
    import shutil

    base, _ = trained
    src = str(tmp_path / "export")  # the exported drafter alone (no trainer state)
    os.makedirs(src)
    for fn in ("config.json", "model.safetensors", "train_meta.json"):
        shutil.copy(base / "a" / fn, src)
    ref = run_cli(target, data_dir, tmp_path / "same", base / "work", "--steps", "1",
                  "--resume", src, "--lr", "1e-12")
    grown = run_cli(target, data_dir, tmp_path / "g", base / "work", "--steps", "2",
                    "--resume", src, "--grow-layers", "1")
    assert grown[0]["loss"] == pytest.approx(ref[0]["loss"], rel=1e-5)
    cfg = json.loads((tmp_path / "g" / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 2
    with safe_open(str(tmp_path / "g" / "model.safetensors"), framework="pt") as f:
        assert f.get_tensor("layers.1.self_attn.o_proj.weight").abs().sum() > 0
    assert json.loads((tmp_path / "g" / "train_meta.json").read_text())["grown_layers"] == 1
    with pytest.raises(SystemExit):
        train.parse_args(["--target", target, "--out", "o", "--steps", "1", "--data-dir",
                          data_dir, "--grow-layers", "1"])


# ------------------------------------------------------------------ synthetic prompts

def _synthetic_code(prompt):
    from specpilot.train_drafter import synthetic

    assert prompt.startswith(synthetic.HUMANEVAL_PREFIX) and prompt.endswith("```")
    return prompt[len(synthetic.HUMANEVAL_PREFIX):-3]


def _braces_balanced(text):
    depth = 0
    for ch in text.replace("\\{", "").replace("\\}", ""):
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            return False
    return depth == 0


def test_synthetic_deterministic_and_mixed():
    from specpilot.evals.datasets import STEP_BY_STEP
    from specpilot.train_drafter import synthetic

    a = synthetic.synthetic_prompts(200, seed=3)
    assert a == synthetic.synthetic_prompts(200, seed=3)
    assert a[:37] == synthetic.synthetic_prompts(37, seed=3)  # prefix-stable in n
    assert [it["prompt"] for it in a] != [it["prompt"] for it in synthetic.synthetic_prompts(200)]
    assert [it["id"] for it in a] == [f"synthetic/{i}" for i in range(200)]
    assert all(set(it) == {"id", "source", "prompt"} and it["source"] == "synthetic" for it in a)
    assert len({it["prompt"] for it in a}) > 190
    fams = [synthetic.family_of(i) for i in range(200)]
    assert set(fams[:6]) == set(synthetic.FAMILIES)  # every family among the first 6
    counts = {f: fams.count(f) for f in synthetic.FAMILIES}
    assert counts == {"competition": 60, "humaneval": 60, "word": 30, "code": 20, "algebra": 20,
                      "explain": 10}
    assert len(synthetic.COMPETITION) >= 40 and len(synthetic.HUMANEVAL_TASKS) >= 40
    assert len({s for s, _ in synthetic.COMPETITION}) >= 6  # subjects
    # each family's prompts have their family's shape
    head = synthetic.HUMANEVAL_PREFIX
    for it, fam in zip(a, fams):
        p = it["prompt"]
        math_like = p.endswith("\n" + STEP_BY_STEP)
        assert math_like == (fam in ("word", "algebra", "competition")), (fam, p)
        assert p.startswith(head) == (fam == "humaneval"), (fam, p)
        if fam == "competition":
            assert "$" in p
        if fam == "code":
            assert p.endswith("Reply with the Python code in a ```python code block.")


def test_synthetic_prompts_well_formed():
    import ast
    import random
    import re

    from specpilot.train_drafter import synthetic

    for subject, template in synthetic.COMPETITION:  # every template, many parameter draws
        for k in range(40):
            text = template(random.Random(k))
            assert text.isascii() and text.strip() == text, (template.__name__, text)
            assert text.replace("\\$", "").count("$") % 2 == 0, (template.__name__, text)
            assert _braces_balanced(text), (template.__name__, text)
            assert not re.search(r"<[a-z]\w*>", text), (template.__name__, text)  # all filled
            assert "+ -" not in text and "- -" not in text, (template.__name__, text)
    names = set()
    for task in synthetic.HUMANEVAL_TASKS:
        names.update(task.names)
        for k in range(20):
            code = synthetic.humaneval_code(task, random.Random(k))
            tree = ast.parse(code)  # pure code: signature + docstring
            (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
            assert fn.name in task.names and len(fn.body) == 1
            doc = ast.get_docstring(fn)
            calls = re.findall(r"^>>> (.*)\n(.*)$", doc, re.M)
            assert len(calls) >= 2, code
            for call, out in calls:  # the examples are what the reference implementation gives
                assert repr(eval(call, {fn.name: task.fn})) == out, (code, call)
    assert len(names) == 2 * len(synthetic.HUMANEVAL_TASKS)  # no name used by two tasks
    for it in synthetic.synthetic_prompts(300, seed=1):
        if synthetic.HUMANEVAL_PREFIX in it["prompt"]:
            ast.parse(_synthetic_code(it["prompt"]))


def test_synthetic_prompts_hold_no_benchmark_text():
    """No math500 problem or humaneval prompt (its first 60 characters) is in any synthetic
    prompt, and no synthetic function takes a humaneval entry-point name."""
    import ast

    from specpilot.evals.datasets import FILES, STEP_BY_STEP, find_file
    from specpilot.train_drafter import synthetic

    rows = {}
    for name in ("math500", "humaneval"):
        path = find_file(name)
        if path is None:
            pytest.skip(f"{FILES[name]} not available")
        with open(path) as f:
            rows[name] = [json.loads(line) for line in f if line.strip()]
    assert len(rows["math500"]) == 500 and len(rows["humaneval"]) == 164
    snippets = [r["problem"].strip()[:60] for r in rows["math500"]]
    snippets += [r["prompt"].strip()[:60] for r in rows["humaneval"]]
    for r in rows["humaneval"]:  # the start of each docstring, too
        fn = [n for n in ast.parse(r["prompt"]).body if isinstance(n, ast.FunctionDef)][-1]
        snippets.append((ast.get_docstring(fn) or "").strip()[:60])
    texts = [it["prompt"] for seed in range(3) for it in synthetic.synthetic_prompts(2000, seed)]
    corpus = "\x00".join(texts)
    found = [s for s in snippets if len(s) >= 20 and s in corpus]
    assert not found, found
    full = set(texts)
    assert not any(f"{r['problem']}\n{STEP_BY_STEP}" in full for r in rows["math500"])
    entry_points = {r["entry_point"] for r in rows["humaneval"]}
    assert not entry_points & {n for t in synthetic.HUMANEVAL_TASKS for n in t.names}


def test_engine_backend_matches_hf(target, data_dir, tmp_path):
    """--gen-backend engine: greedy continuations equal transformers' (fp32, CPU), and a sampled
    job's draw does not depend on the batch it runs in (per-request seeds)."""
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    tok = __import__("transformers").AutoTokenizer.from_pretrained(target)
    ps = [prompts.render(tok, q) for q in ("2+3?", "Add 7 and 8.", "x")]
    eng = data.EngineGenerator(target, "cpu", "float32", 4, 64, 24)
    hf = data.HFGenerator(m, 24, [tok.eos_token_id], tok.pad_token_id)
    assert eng(ps, None, [0] * 3) == hf(ps, None, [0] * 3)
    samp = {"temperature": 1.5, "top_p": 0.95, "seed": 0}
    seeds = [data.job_seed(0, data.prompt_hash(p), 1) for p in ps]
    together = eng(ps, samp, seeds)
    alone = [eng([p], samp, [s])[0] for p, s in zip(ps, seeds)]
    assert together == alone and together != eng(ps, None, [0] * 3)
    two = data.EngineGenerator(target, "cpu", "float32", 2, 64, 24)  # 2 running, 3 per call
    assert two.jobs_per_call == 2 * data.EngineGenerator.JOBS_PER_CALL
    assert two(ps, None, [0] * 3) == hf(ps, None, [0] * 3)
    assert two(ps, samp, seeds) == together
    waves = data.EngineGenerator(target, "cpu", "float32", 2, 64, 24, min_admit=2)  # --gen-admit
    assert waves(ps, None, [0] * 3) == hf(ps, None, [0] * 3) and waves(ps, samp, seeds) == together
    run_cli(target, data_dir, tmp_path / "e", tmp_path / "w", "--steps", "1", "--gen-backend",
            "engine", "--samples-per-prompt", "2", "--gen-admit", "2")
    meta = json.loads((tmp_path / "e" / "train_meta.json").read_text())["data"]
    assert meta["gen_backend"] == "engine" and meta["sampled"]["sequences"] >= 1


def test_generate_completions_calls_per_jobs_per_call(tmp_path):
    """A generator with jobs_per_call (the engine) gets that many jobs per call, others
    batch_size; every job is generated once, in the order of the jobs."""
    class Gen:
        name = "fake"

        def __init__(self, per_call=None):
            self.calls = []
            if per_call:
                self.jobs_per_call = per_call

        def __call__(self, prompts, sampling, seeds):
            self.calls.append(len(prompts))
            return [[p[0], 7] for p in prompts]

    jobs = [([i + 10] * (1 + i % 3), 0) for i in range(12)]
    for name, gen, want in (("engine", Gen(5), [5, 5, 2]), ("hf", Gen(), [2] * 6)):
        out = data.generate_completions(gen, jobs, 2, str(tmp_path / name), "k", 4)
        assert gen.calls == want
        assert out == [[p[0], 7] for p, _ in jobs]


def test_self_instruct_instructions_and_cleaning():
    from specpilot.train_drafter import self_instruct as si

    a = si.instructions(50, seed=1)
    assert a[:20] == si.instructions(20, seed=1)  # a larger n extends the same list
    assert a != si.instructions(50, seed=2)
    assert {x["kind"] for x in a} == {"word", "competition", "code"}
    assert {x["kind"] for x in si.instructions(30, 0, si.parse_mix("code:1"))} == {"code"}
    for bad, msg in (("poem:1", "unknown self-instruct kind"), ("word:x", "bad weight"),
                     ("word:0", "must be > 0")):
        with pytest.raises(ValueError, match=msg):
            si.parse_mix(bad)
    text = ("**Problem 1:** Tom buys 3 boxes of 12 pencils and gives away 7.\nHow many are left?"
            "\n\nSolution:\nTom has 3 * 12 = 36 pencils.")
    assert si.clean_problem(text, "word") == ("Tom buys 3 boxes of 12 pencils and gives away 7.\n"
                                              "How many are left?")
    assert si.clean_problem("Solve it: 2 + 2", "word") is None  # too short
    assert si.clean_problem("Think about why the sky looks blue on some days?", "word") is None
    assert si.clean_problem("Write a function that reverses each word of a sentence and keeps "
                            "the order of the words.", "code") is not None  # code: no digit needed
    assert si.as_prompt("P 1?", "word").endswith(STEP_BY_STEP)
    # a repeated instruction is a new draw (its own seed and cache entry), not the same job again
    assert si.draws([[1, 2], [3], [1, 2], [1, 2], [3]]) == [([1, 2], 0), ([3], 0), ([1, 2], 1),
                                                            ([1, 2], 2), ([3], 1)]
    texts = [x["text"] for x in si.instructions(200, 0, si.parse_mix("competition:1"))]
    assert len(set(texts)) > 30 and all("{" not in t for t in texts)
    assert si.as_prompt("P", "code").endswith("```python code block.")


def test_prompts_file_drops_benchmark_like_prompts(data_dir, tmp_path):
    heads, missing = prompts.benchmark_heads(data_dir, strict=False)
    assert missing == ["math500", "humaneval"] and prompts._head("7*6?") in heads
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"prompt": "7*6?\nThink step by step."}) + "\n\n"
                 + json.dumps({"prompt": "A new problem with 3 apples?", "id": "x1"}) + "\n")
    items, info = prompts.read_prompts_file(str(f), heads)
    assert [it["id"] for it in items] == ["x1"] and info["dropped_benchmark_like"] == 1
    f.write_text('{"prompt": "ok"}\n{"text": "no prompt"}\n')
    with pytest.raises(ValueError, match=r"p.jsonl:2: each line needs"):
        prompts.read_prompts_file(str(f), heads)
    with pytest.raises(FileNotFoundError):
        prompts.benchmark_heads(data_dir)  # strict: every benchmark file must be there


def test_self_instruct_cli_then_training(target, data_dir, tmp_path, monkeypatch):
    """The target writes problems (a tiny random model writes noise, so the cleaning is relaxed
    here), the file feeds --prompts-file, and a second run reads the cached answers back."""
    from specpilot.train_drafter import self_instruct as si

    full = tmp_path / "evals"
    full.mkdir()
    for fn in os.listdir(data_dir):
        (full / fn).write_text(open(os.path.join(data_dir, fn)).read())
    (full / "math500_test.jsonl").write_text(json.dumps({"problem": "Find $x$.", "unique_id": "m"})
                                             + "\n")
    (full / "humaneval.jsonl").write_text(json.dumps({"prompt": "def f():\n", "task_id": "h"})
                                          + "\n")
    monkeypatch.setattr(si, "clean_problem", lambda text, kind: " ".join(text.split()) or None)
    out, work = tmp_path / "q.jsonl", tmp_path / "work"
    argv = ["--target", target, "--data-dir", str(full), "--out", str(out), "--n", "6",
            "--max-new-tokens", "12", "--gen-backend", "hf", "--gen-batch-size", "4",
            "--work-dir", str(work), "--device", "cpu"]
    assert si.main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = [x["kind"] for x in si.instructions(6)]
    assert 1 <= len(rows) <= 6 and all(r["source"].startswith("self-instruct/") for r in rows)
    for r in rows:
        i = int(r["id"].split("/")[1])
        assert r["source"] == f"self-instruct/{kinds[i]}"
        assert r["prompt"].endswith(STEP_BY_STEP if kinds[i] != "code" else "code block.")
    files = [os.path.join(work, f) for f in os.listdir(work)]
    before = [os.path.getmtime(f) for f in files]
    assert si.main(argv) == 0 and out.read_text().splitlines() == [json.dumps(r) for r in rows]
    assert [os.path.getmtime(f) for f in files] == before  # cached, not generated again
    run_cli(target, str(full), tmp_path / "d", tmp_path / "w2", "--steps", "1",
            "--prompts-file", str(out))
    meta = json.loads((tmp_path / "d" / "train_meta.json").read_text())["data"]
    pf = meta["sources"]["prompts-files"]
    assert pf["files"][0]["lines"] == len(rows) and pf["benchmarks_not_checked"] == []
    assert sum(v for k, v in meta["prompts_by_source"].items()
               if k.startswith("self-instruct/")) == len(rows)
