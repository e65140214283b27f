"""validate.py fails on an engine that is deliberately wrong at one position, and the near-tie
rule of the comparison (pure) accepts only small gaps."""

from __future__ import annotations

import json

import pytest
import torch

from specpilot import settings as S
from specpilot.bench.checkpoints import resolve_paths
from specpilot.validate import cli
from specpilot.validate.forcing import check_direction
from tests.workflow.conftest import DEMO

BOOST = 8.0  # the wrong token beats the right one by this much: far from a near-tie


def make_wrong_at(engine, position: int):
    """Make `engine` (an OfflineEngine) wrong at one absolute position: there the target's
    runner-up logit is raised above its top-1 by BOOST, along the engine's own decode / verify
    path (so its greedy output and its forced argmax both change at that position only)."""
    runner, model = engine.runner, engine.runner.model
    run_target, compute_logits, state = runner.run_target, model.compute_logits, {}

    def tracked_run_target(rows, prefix_lens, extend_lens, *args, **kwargs):
        pos, last = [], []
        for p, e in zip(prefix_lens, extend_lens):
            pos.extend(range(p, p + e))
            last.append(len(pos) - 1)
        state.update(pos=pos, last=last)
        return run_target(rows, prefix_lens, extend_lens, *args, **kwargs)

    def wrong_logits(hidden):
        logits = compute_logits(hidden)
        n = hidden.shape[0]
        pos = state["pos"] if n == len(state["pos"]) else \
            [state["pos"][i] for i in state["last"]] if n == len(state["last"]) else []
        for row, p in enumerate(pos):
            if p == position:
                top = logits[row].topk(2).indices
                logits[row, top[1]] = logits[row, top[0]] + BOOST
        return logits

    runner.run_target = tracked_run_target
    model.compute_logits = wrong_logits
    return engine


@pytest.fixture()
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_validate_fails_on_an_engine_wrong_at_one_position(tmp_path, one_thread, demo_model_dir):
    setting = S.load(DEMO)
    paths = resolve_paths(setting)
    items = cli.prompt_items(setting, paths, ["chat"], 1)
    wrong_pos = len(items[0]["input_ids"]) + 3  # the logits row that predicts output token 4
    real = cli.engine_factory(setting, paths)

    def factory(name):
        eng = real(name)
        return make_wrong_at(eng, wrong_pos) if name == "stock" else eng

    rc = cli.main([DEMO, "stock", "--datasets", "chat", "--limit", "1", "--max-new-tokens", "8",
                   "--results", str(tmp_path)], make_engine=factory)
    assert rc == 1
    rep = json.loads((tmp_path / DEMO / "validate-stock" / "report.json").read_text())
    assert not rep["passed"]
    fwd, back = rep["directions"]
    assert fwd["name"] == "ar->stock" and fwd["agree"] == fwd["positions"] - 1 == 7
    (d,) = fwd["disagreements"]
    assert d["position"] == 4 and not d["near_tie"] and d["gap"] == pytest.approx(BOOST, rel=1e-3)
    assert [x["position"] for x in back["disagreements"]] == [4]  # ar rejects stock's token 4
    assert rep["identical_outputs"] == 0


def test_near_tie_rule():
    items = [{"dataset": "chat", "id": "chat/0"}]
    rep = check_direction("ar->x", items, [[5, 6, 7]], [[(5, 3.0), (9, 0.004), (7, 1.0)]], 0.01)
    assert (rep.positions, rep.agree) == (3, 2)
    assert rep.disagreements == [{"dataset": "chat", "id": "chat/0", "position": 1, "forced": 6,
                                  "argmax": 9, "gap": 0.004, "near_tie": True}]
    assert rep.failures == []
    rep = check_direction("ar->x", items, [[5, 6, 7]], [[(5, 3.0), (9, 0.5), (7, 1.0)]], 0.01)
    assert len(rep.failures) == 1
    with pytest.raises(RuntimeError, match="3 checks for 2 forced tokens"):
        check_direction("ar->x", items, [[5, 6]], [[(5, 1.0)] * 3], 0.01)
