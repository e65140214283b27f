"""Settings folders: every deployment loads and validates; the loader names what is wrong."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specpilot import settings as S
from tests.workflow.conftest import DEMO, REPO, demo_raw, make_setting

PRODUCT = ["h100_c1_qwen38-27b_dflash2", "h100_c1_qwen38-27b_dspark",
           "h100_c1_muse-glimmer-30b_dflash2", "h100_c1_muse-glimmer-30b_dspark",
           "rtxpro6000_c1_qwen38-27b_dflash2", "rtxpro6000_c1_muse-glimmer-30b_dflash2"]
H200 = ["h200_c1_qwen38-27b_dflash2", "h200_c1_qwen38-27b_dspark",
        "h200_c1_muse-glimmer-30b_dflash2", "h200_c1_muse-glimmer-30b_dspark"]
# final's landed mechanisms per deployment, each measured faster there (docs/benchmarks/)
LANDED = {f"{gpu}_c1_{t}_{d}": ["w12"] for gpu in ("h100", "h200")
          for t in ("qwen38-27b", "muse-glimmer-30b") for d in ("dflash2", "dspark")}
# repo ids as the model cards name them (reference/dflash.md §3-4 and the cards themselves)
TARGETS = {"qwen38-27b": "Qwen/Qwen3.8-27B", "muse-glimmer-30b": "meta-models/Muse-Glimmer-30B"}
DRAFTERS = {("qwen38-27b", "dflash2"): "z-lab/Qwen3.8-27B-DFlash2",
            ("qwen38-27b", "dspark"): "RadixArk/Qwen3.8-27B-DSpark",
            ("muse-glimmer-30b", "dflash2"): "z-lab/Muse-Glimmer-30B-DFlash2",
            ("muse-glimmer-30b", "dspark"): "DaoCloud/Muse-Glimmer-30B-DSpark"}


def test_all_deployments_exist_and_validate():
    names = S.list_settings()
    assert set(PRODUCT + H200 + [DEMO]) <= set(names)
    for name in names:
        s = S.load(name)
        assert s.name == name and set(s.engines) == set(S.ENGINES)


@pytest.mark.parametrize("name", PRODUCT + H200)
def test_deployment_facts(name):
    s = S.load(name)
    gpu, conc, model, drafter = re.match(r"^([a-z0-9]+)_c(\d+)_(.+)_(dflash2|dspark)$", name).groups()
    assert s.gpu.startswith(gpu) and s.concurrency == int(conc) == 1
    assert s.target.repo == TARGETS[model] and s.target.source == "hub"
    assert s.drafter.repo == DRAFTERS[(model, drafter)]
    assert s.drafter.algorithm == drafter.upper()
    for m in s.models():
        assert m.card == f"https://huggingface.co/{m.repo}"
        assert m.revision is None or re.fullmatch(r"[0-9a-f]{40}", m.revision)
    ar, stock, final = (s.flags(e) for e in S.ENGINES)
    assert not any(k.startswith("--speculative") for k in ar)
    assert stock["--speculative-draft-model-path"] == "{drafter}"
    assert {k: v for k, v in stock.items() if not k.startswith("--speculative")} == ar
    landed = s.engines["final"]["landed"]
    assert final == {**stock, **{k: v for m in landed for k, v in m["flags"].items()}}
    assert [m["name"] for m in landed] == LANDED.get(name, [])
    if not landed:
        assert "final equals stock" in s.engines["final"]["note"]
    args = S.parse_server_args(S.render_flags(stock, {"target": "/t", "drafter": "/d"}))
    assert args.speculative_algorithm == drafter.upper() and args.device == "cuda"


def test_h200_equivalents_match_product_flags():
    """ar and stock as the H100 twin's; final lands a mechanism on the H200 only once it is
    measured faster there, so its flags are stock's plus a subset of the twin's landed ones."""
    for name in H200:
        twin = name.replace("h200_", "h100_")
        h200, h100 = S.load(name), S.load(twin)
        assert all(h200.flags(e) == h100.flags(e) for e in ("ar", "stock"))
        assert all(m in h100.engines["final"]["landed"] for m in h200.engines["final"]["landed"])


def test_demo_setting():
    s = S.load(DEMO)
    assert s.gpu == "cpu" and s.device == "cpu"
    assert (s.target.source, s.drafter.source) == ("demo", "bundled")
    assert (S.ASSETS_DIR / s.drafter.asset / "model.safetensors").is_file()
    assert S.parse_server_args(S.render_flags(s.flags("stock"), {"target": "/t", "drafter": "/d"})).device == "cpu"


def _error(tmp_path, **changes) -> str:
    folder = make_setting(tmp_path, "cpu_demo_broken", **changes)
    with pytest.raises(S.SettingsError) as e:
        S.load(str(folder))
    return str(e.value)


@pytest.mark.parametrize("changes, expect", [
    ({"gpu": "a100"}, "gpu: 'a100' is not one of"),
    ({"concurrency": 0}, "concurrency: must be an integer >= 1"),
    ({"colour": "blue"}, "colour: unknown key"),
    ({"target__source": "ftp"}, "target.source: 'ftp' is not one of"),
    ({"drafter__algorithm": "EAGLE"}, "drafter.algorithm: 'EAGLE'"),
    ({"engines__ar__flags__--speculative-algorithm": "DFLASH"}, "ar.flags: the baseline takes no speculative flag"),
    ({"engines__ar__flags__--dtypo": "float32"}, "'--dtypo' is not a server flag"),
    ({"engines__stock__flags__--max-running-requests": 8}, "must be ar's flags plus speculative flags only"),
    ({"engines__ar__flags__--port": 1234}, "--port is not a setting"),
    ({"engines__ar__flags__--device": "cuda"}, "--device: must be cpu for gpu cpu"),
    ({"engines__ar__flags__--dtype": "fp7"}, "ar.flags: the server rejects them"),
    ({"engines__stock__flags__--speculative-draft-model-path": "/x"}, "must be \"{drafter}\""),
    ({"engines__final__extends": "ar"}, "final.extends: must be stock"),
    ({"engines__final__note": "fast"}, "final.note: nothing has landed"),
    ({"engines__final__flags": {"--dtype": "float16"}}, "final.flags: unknown key"),
    ({"drafter__asset": "no-such-drafter"}, "drafter.asset: 'no-such-drafter' is not a checkpoint folder"),
    ({"bench__concurrency": []}, "bench.concurrency: must be a non-empty list"),
    ({"bench__datasets": ["gsm8k", "squad"]}, "bench.datasets: 'squad'"),
    ({"validate__near_tie_gap": -1}, "validate.near_tie_gap"),
    # malformed values are named, not a TypeError traceback
    ({"gpu": ["cpu"]}, "gpu: ['cpu'] is not one of"),
    ({"engines": 5}, "engines: must define exactly ('ar', 'stock', 'final'), got int"),
    ({"engines__ar__flags__--dtype": ["float32"]}, "ar.flags.--dtype: must be a scalar"),
    # a quoted "false" rendered the switch on
    ({"engines__ar__flags__--disable-cuda-graph": "false"},
     "ar.flags.--disable-cuda-graph: a switch takes true or false, got 'false'"),
    ({"engines__stock__flags__--speculative-num-draft-tokens": 0},
     "--speculative-num-draft-tokens must be >= 2"),
])
def test_loader_names_what_is_wrong(tmp_path, changes, expect):
    assert expect in _error(tmp_path, **changes)


def test_final_takes_the_landed_mechanisms_flags(tmp_path):
    """final = stock + each landed mechanism's flags (how W12 lands: issue 7); a landed flag
    the server does not know, or a landed entry without a name, is refused."""
    w12 = {"name": "w12", "issue": 7, "flags": {"--weight-format": "w12"}}
    folder = make_setting(tmp_path, "cpu_demo_landed", engines__final__landed=[w12],
                          engines__final__note="final = stock + W12 weights")
    s = S.load(str(folder))
    assert s.flags("final") == dict(s.flags("stock"), **{"--weight-format": "w12"})
    assert s.engines["final"]["landed"] == [w12]
    args = S.parse_server_args(S.render_flags(s.flags("final"), {"target": "/t", "drafter": "/d"}))
    assert args.weight_format == "w12"
    assert "final.flags: the server rejects them" in _error(
        tmp_path, engines__final__landed=[dict(w12, flags={"--weight-format": "w8"})],
        engines__final__note="final = stock + W8")
    assert "final.landed[0]: needs name" in _error(
        tmp_path, engines__final__landed=[{"flags": {}}], engines__final__note="final = stock")
    # a landed entry is checked as ar's and stock's flags are: a typo of its keys (final would
    # silently equal stock), no flags, an unknown or abbreviated flag, a flag stock fixes
    for landed, expect in (
            ([{"name": "w12", "flag": {"--weight-format": "w12"}}], "landed[0].flag: unknown key"),
            ([{"name": "w12", "flags": {}}], "landed[0].flags: a landed mechanism needs its flags"),
            ([dict(w12, flags={"--weight": "w12"})], "'--weight' is not a server flag"),
            ([dict(w12, flags={"--device": "cuda"})], "--device is fixed by the setting"),
            ([dict(w12, flags={"--disable-cuda-graph": "no"})], "a switch takes true or false")):
        assert expect in _error(tmp_path, engines__final__landed=landed,
                                engines__final__note="final = stock + W12"), landed


def test_serve_sh_takes_a_setting_path_relative_to_the_caller(tmp_path, script_env):
    make_setting(tmp_path / "mysets", "cpu_demo_mine")
    r = subprocess.run(["bash", str(REPO / "scripts" / "serve.sh"), "mysets/cpu_demo_mine", "ar",
                        "0", "--dry-run"], cwd=tmp_path, env=script_env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "launch_server" in r.stdout, r.stderr[-2000:]


def test_relative_paths_are_the_callers(tmp_path, monkeypatch):
    """The scripts cd to the repo root before Python starts; a relative setting path,
    --local-dir or --results stays relative to where the user ran them
    ($SPECPILOT_CALLER_CWD, which scripts/lib/python.sh exports)."""
    from specpilot.bench.checkpoints import local_dir_default
    folder = make_setting(tmp_path / "mysets", "cpu_demo_mine")
    monkeypatch.setenv("SPECPILOT_CALLER_CWD", str(tmp_path))
    monkeypatch.chdir(REPO)
    assert S.find("mysets/cpu_demo_mine") == folder.resolve()
    assert local_dir_default("models") == (tmp_path / "models").resolve()
    assert S.caller_path("/abs/x") == Path("/abs/x")
    monkeypatch.delenv("SPECPILOT_CALLER_CWD")   # run without the scripts: the working directory
    monkeypatch.chdir(tmp_path)
    assert S.find("mysets/cpu_demo_mine") == folder.resolve()


def test_hub_model_errors(tmp_path):
    import yaml

    base = yaml.safe_load((REPO / "settings" / "h100_c1_qwen38-27b_dflash2" / "setting.yaml").read_text())
    folder = make_setting(tmp_path, "h100_c1_x_dflash2", base, target__repo="not a repo",
                          target__revision="main", drafter__card=None)
    with pytest.raises(S.SettingsError) as e:
        S.load(str(folder))
    msg = str(e.value)
    assert "target.repo: 'not a repo' is not a Hugging Face repo id" in msg
    assert "target.revision: 'main' must be a 40-hex commit id" in msg
    assert "drafter.card: the model card URL is required" in msg
    folder = make_setting(tmp_path, "h100_c2_x_dflash2", base)
    with pytest.raises(S.SettingsError, match="concurrency: 1 but the name says c2"):
        S.load(str(folder))


def test_lock_file_pins_and_conflicts(tmp_path):
    import yaml

    base = yaml.safe_load((REPO / "settings" / "h200_c1_qwen38-27b_dspark" / "setting.yaml").read_text())
    folder = make_setting(tmp_path, "h200_c1_qwen38-27b_dspark", base)
    sha = "a" * 40
    (folder / S.LOCK_FILE).write_text(json.dumps({"Qwen/Qwen3.8-27B": {"revision": sha}}))
    s = S.load(str(folder))
    assert s.target.revision == sha and s.drafter.revision is None
    make_setting(tmp_path, "h200_c1_qwen38-27b_dspark", base, target__revision="b" * 40)
    with pytest.raises(S.SettingsError, match="differs from revisions.lock.json"):
        S.load(str(folder))
    (folder / S.LOCK_FILE).write_text("{not json")
    with pytest.raises(S.SettingsError, match="revisions.lock.json: not a JSON object"):
        S.load(str(folder))


def test_name_must_match_folder_and_unknown_setting(tmp_path):
    folder = make_setting(tmp_path, "cpu_demo_other")
    raw = demo_raw()
    (folder / "setting.yaml").write_text((folder / "setting.yaml").read_text().replace(
        "name: cpu_demo_other", f"name: {raw['name']}"))
    with pytest.raises(S.SettingsError, match="must equal the folder name"):
        S.load(str(folder))
    with pytest.raises(S.SettingsError, match="no setting 'nope'"):
        S.load("nope")


def test_render_flags():
    argv = S.render_flags({"--model-path": "{target}", "--skip-tokenizer-init": True,
                           "--dtype": "float32", "--speculative-draft-model-path": "{drafter}"},
                          {"target": "/t", "drafter": "/d"})
    assert argv == ["--model-path", "/t", "--skip-tokenizer-init", "--dtype", "float32",
                    "--speculative-draft-model-path", "/d"]
    assert S.render_flags({"--skip-tokenizer-init": False}) == []
    with pytest.raises(S.SettingsError, match="needs the drafter path"):
        S.render_flags({"--speculative-draft-model-path": "{drafter}"}, {"target": "/t"})


def test_settings_cli(tmp_path):
    run = lambda *a, **kw: subprocess.run([sys.executable, "-m", "specpilot.settings", *a],  # noqa: E731
                                          capture_output=True, text=True, cwd=REPO, **kw)
    r = run("check")
    assert r.returncode == 0 and r.stdout.count("ok ") == len(S.list_settings())
    r = run("show", "h100_c1_muse-glimmer-30b_dflash2")
    assert r.returncode == 0 and "--speculative-num-draft-tokens 16" in r.stdout
    make_setting(tmp_path, "cpu_demo_bad", gpu="tpu")
    import os

    r = run("check", env={**os.environ, "SPECPILOT_SETTINGS_DIR": str(tmp_path)})
    assert r.returncode == 1 and "gpu: 'tpu'" in r.stdout
    assert run("frobnicate").returncode == 2
