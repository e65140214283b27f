"""download_models.sh / specpilot.bench.download without a hub: the first (simulated) online
download pins the revision in the lock file; offline use checks local copies and says what to do."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pytest
import yaml

from specpilot import settings as S
from specpilot.bench import download as DL
from specpilot.bench.checkpoints import MARKER, resolve_paths
from tests.workflow.conftest import REPO, make_setting

SHA_T, SHA_D = "1" * 40, "2" * 40
FILES = {"config.json": b"{}", "model.safetensors.index.json":
         json.dumps({"weight_map": {"a": "model-00001.safetensors"}}).encode(),
         "model-00001.safetensors": b"x" * 100}


@pytest.fixture()
def setting(tmp_path):
    base = yaml.safe_load((REPO / "settings" / "h100_c1_qwen38-27b_dflash2" / "setting.yaml").read_text())
    return make_setting(tmp_path / "settings", "h100_c1_qwen38-27b_dflash2", base)


def fake_hub(monkeypatch, calls):
    def info(repo, revision):
        calls.append(("info", repo, revision))
        siblings = [SimpleNamespace(rfilename=k, size=len(v), lfs=None) for k, v in FILES.items()]
        return SimpleNamespace(sha=SHA_T if repo.startswith("Qwen") else SHA_D, siblings=siblings)

    def snapshot(repo, revision, local_dir):
        calls.append(("snapshot", repo, revision))
        local_dir.mkdir(parents=True, exist_ok=True)
        for k, v in FILES.items():
            (local_dir / k).write_bytes(v)
        return local_dir

    monkeypatch.setattr(DL, "_model_info", info)
    monkeypatch.setattr(DL, "_snapshot", snapshot)


def test_first_download_pins_revisions(setting, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls = []
    fake_hub(monkeypatch, calls)
    paths = DL.download(S.load(str(setting)), local_dir=str(tmp_path / "models"))
    lock = json.loads((setting / S.LOCK_FILE).read_text())
    assert lock["Qwen/Qwen3.8-27B"]["revision"] == SHA_T
    assert lock["z-lab/Qwen3.8-27B-DFlash2"]["revision"] == SHA_D
    assert lock["Qwen/Qwen3.8-27B"]["files"]["model-00001.safetensors"]["size"] == 100
    assert ("snapshot", "Qwen/Qwen3.8-27B", SHA_T) in calls
    assert paths["target"] == tmp_path / "models" / "Qwen" / "Qwen3.8-27B"
    # pinned now: a second download asks for exactly that revision and resolves nothing
    calls.clear()
    DL.download(S.load(str(setting)), local_dir=str(tmp_path / "models"))
    assert [c for c in calls if c[0] == "info"] == []
    assert {c[2] for c in calls} == {SHA_T, SHA_D}
    # and serve/bench/validate find the folders through the marker
    assert resolve_paths(S.load(str(setting)), local_dir=str(tmp_path / "models"))["drafter"] \
        == tmp_path / "models" / "z-lab" / "Qwen3.8-27B-DFlash2"


def test_offline_checks_local_copies(setting, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    fake_hub(monkeypatch, [])
    models = tmp_path / "models"
    DL.download(S.load(str(setting)), local_dir=str(models))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(DL, "_model_info", None)  # any hub call would fail loudly
    monkeypatch.setattr(DL, "_snapshot", None)
    DL.download(S.load(str(setting)), local_dir=str(models))
    shard = models / "Qwen" / "Qwen3.8-27B" / "model-00001.safetensors"
    shard.write_bytes(b"x" * 10)  # a truncated file
    with pytest.raises(DL.DownloadError, match="model-00001.safetensors: 10 bytes, the hub lists 100"):
        DL.download(S.load(str(setting)), local_dir=str(models))
    shard.unlink()
    with pytest.raises(DL.DownloadError, match=r"model-00001.safetensors \(in model.safetensors.index.json\) is missing"):
        DL.download(S.load(str(setting)), local_dir=str(models))
    import shutil

    shutil.rmtree(models / "z-lab")
    with pytest.raises(DL.DownloadError, match="HF_HUB_OFFLINE=1 forbids fetching it"):
        DL.download(S.load(str(setting)), local_dir=str(models))
    with pytest.raises(FileNotFoundError, match=f"no {MARKER}"):
        resolve_paths(S.load(str(setting)), local_dir=str(models))


def test_offline_unpinned_is_a_clear_error(setting, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DL.DownloadError, match="no pinned revision and HF_HUB_OFFLINE=1"):
        DL.download(S.load(str(setting)))
    with pytest.raises(FileNotFoundError, match="has no pinned revision yet"):
        resolve_paths(S.load(str(setting)))


def test_download_script_usage_and_offline(script_env, tmp_path):
    sh = ["bash", str(REPO / "scripts" / "download_models.sh")]
    r = subprocess.run(sh, capture_output=True, text=True, env=script_env)
    assert r.returncode == 2 and "usage:" in r.stderr
    r = subprocess.run(sh + ["no_such_setting"], capture_output=True, text=True, env=script_env)
    assert r.returncode == 2 and "no setting 'no_such_setting'" in r.stderr
    r = subprocess.run(sh + ["h200_c1_muse-glimmer-30b_dspark", "--local-dir", str(tmp_path)],
                       capture_output=True, text=True, env=script_env)
    assert r.returncode == 1 and "HF_HUB_OFFLINE=1" in r.stderr and "Traceback" not in r.stderr
