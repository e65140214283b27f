"""Download a setting's checkpoints at exactly their pinned revisions (scripts/download_models.sh).

    python -m specpilot.bench.download <setting> [--local-dir DIR] [--verify-hashes]

Per hub model of the setting (target, drafter):
  1. revision: the pinned one (setting.yaml or revisions.lock.json). Not pinned yet: the hub's
     current commit of the default branch is resolved and written to the lock file with the
     file list (sizes, LFS sha256), so every later download gets the same bytes.
  2. download: `huggingface_hub.snapshot_download(repo, revision=<sha>)` into the HF cache, or
     into DIR/<owner>/<name> with --local-dir. Resumable (partial files are continued), with
     progress bars. HF_HUB_OFFLINE=1: nothing is fetched; the local copy is only checked.
  3. check: every file of the lock's list is present with its size (and, with --verify-hashes,
     its sha256); every shard named by a `*.safetensors.index.json` weight_map is present.
     With --local-dir a MARKER records the verified revision (serve/bench/validate read it).
Local-only sources (demo model, random drafter) are prepared instead. Exit status: 0 when every
checkpoint is present and checked, 1 when one is missing or wrong (the message says which and
what to run), 2 on bad arguments or an invalid setting.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Optional

from specpilot.bench.checkpoints import (MARKER, local_dir_default, repo_folder, resolve_paths,
                                         write_lock)


class DownloadError(RuntimeError):
    pass


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _model_info(repo: str, revision: Optional[str]):  # monkeypatched by tests
    from huggingface_hub import HfApi

    return HfApi().model_info(repo, revision=revision, files_metadata=True)


def _snapshot(repo: str, revision: str, local_dir: Optional[Path]) -> Path:  # monkeypatched by tests
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo, revision=revision,
                                  local_dir=str(local_dir) if local_dir else None))


def file_list(info) -> dict:
    """{path: {"size": int|None, "sha256": str|None}} from a ModelInfo with files metadata."""
    out = {}
    for s in info.siblings or []:
        lfs = getattr(s, "lfs", None)
        sha = getattr(lfs, "sha256", None) if lfs is not None else None
        out[s.rfilename] = {"size": getattr(s, "size", None), "sha256": sha}
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def check_folder(folder: Path, files: Optional[dict], verify_hashes: bool = False) -> list[str]:
    """Problems of a local checkpoint folder against the lock's file list and the index."""
    from tqdm import tqdm

    problems = []
    if not (folder / "config.json").is_file():
        problems.append("config.json is missing")
    for name, meta in sorted((files or {}).items()):
        p = folder / name
        if not p.is_file():
            problems.append(f"{name} is missing")
        elif meta.get("size") is not None and p.stat().st_size != meta["size"]:
            problems.append(f"{name}: {p.stat().st_size} bytes, the hub lists {meta['size']}")
    if verify_hashes:
        todo = [(n, m["sha256"]) for n, m in sorted((files or {}).items())
                if m.get("sha256") and (folder / n).is_file()]
        for name, sha in tqdm(todo, desc="sha256", unit="file", file=sys.stderr):
            if _sha256(folder / name) != sha:
                problems.append(f"{name}: sha256 differs from the hub's LFS sha256")
    for index in sorted(folder.glob("*.safetensors.index.json")):
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (ValueError, KeyError) as e:
            problems.append(f"{index.name}: unreadable weight_map ({e})")
            continue
        problems += [f"{s} (in {index.name}) is missing" for s in sorted(shards)
                     if not (folder / s).is_file()]
    return problems


def _hub(fn, repo: str, *args):
    try:
        return fn(repo, *args)
    except Exception as e:  # network, auth (gated repo), unknown revision: one clear message
        raise DownloadError(
            f"{repo}: the hub request failed ({type(e).__name__}: {str(e)[:300]}). Check the "
            "network and, for gated repos, HF_TOKEN; with HF_HUB_OFFLINE=1 local copies are only "
            "checked.") from None


def download_model(setting, model, local_dir: Optional[Path], verify_hashes: bool) -> Path:
    rev = model.revision
    entry = setting.lock.get(model.repo) or {}
    files = entry.get("files")
    if offline():
        if rev is None:
            raise DownloadError(
                f"{model.repo}: no pinned revision and HF_HUB_OFFLINE=1. The first download "
                f"must be online: it resolves the revision and pins it in {setting.lock_path}.")
        print(f"[download] {model.repo}@{rev[:12]}: offline, checking the local copy",
              file=sys.stderr)
        folder = _local(setting, model, local_dir)
    else:
        if rev is None or files is None:
            info = _hub(_model_info, model.repo, rev)
            if rev is None:
                print(f"[download] {model.repo}: not pinned yet; resolved {info.sha}, writing "
                      f"{setting.lock_path}", file=sys.stderr)
            rev, files = rev or info.sha, file_list(info)
            write_lock(setting, model.repo, rev, files)
        target = repo_folder(local_dir, model.repo) if local_dir else None
        print(f"[download] {model.repo}@{rev[:12]} -> {target or 'the Hugging Face cache'}",
              file=sys.stderr)
        folder = _hub(_snapshot, model.repo, rev, target)
    problems = check_folder(folder, files, verify_hashes)
    if problems:
        raise DownloadError(f"{model.repo}@{rev[:12]} in {folder} is incomplete or wrong:\n    "
                            + "\n    ".join(problems)
                            + ("\n  run it again online to fetch or repair the files (it resumes)"))
    if local_dir is not None:
        (folder / MARKER).write_text(json.dumps({"repo": model.repo, "revision": rev}) + "\n")
    print(f"[download] {model.repo}@{rev[:12]}: ok ({len(files or {})} files checked) at {folder}",
          file=sys.stderr)
    return folder


def _local(setting, model, local_dir: Optional[Path]) -> Path:
    if local_dir is not None:
        folder = repo_folder(local_dir, model.repo)
        if not (folder / "config.json").is_file():
            raise DownloadError(
                f"{model.repo}@{model.revision[:12]} is not in {folder} and HF_HUB_OFFLINE=1 "
                f"forbids fetching it. Download it on a machine with hub access (bash "
                f"scripts/download_models.sh {setting.name} --local-dir DIR) and copy DIR here.")
        return folder
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model.repo, revision=model.revision, local_files_only=True))
    except Exception as e:
        raise DownloadError(
            f"{model.repo}@{model.revision[:12]} is not in the Hugging Face cache and "
            f"HF_HUB_OFFLINE=1 forbids fetching it ({type(e).__name__}). Unset HF_HUB_OFFLINE on "
            f"a machine with hub access, or use --local-dir with a copied folder.") from None


def download(setting, local_dir: Optional[str] = None, verify_hashes: bool = False) -> dict:
    """Fetch/check every checkpoint of `setting`; returns {"target": Path, "drafter": Path}."""
    from specpilot import settings as S

    ld = local_dir_default(local_dir)
    if ld is not None:
        ld.mkdir(parents=True, exist_ok=True)
    failures, paths = [], {}
    for model in setting.models():
        if model.source != "hub":
            continue
        try:
            paths[model.role] = download_model(setting, model, ld, verify_hashes)
        except DownloadError as e:
            failures.append(str(e))
        setting = S.load(str(setting.folder))  # the lock file may have changed
    if failures:
        raise DownloadError("\n".join(failures))
    local = [m for m in setting.models() if m.source != "hub"]
    if local:
        print(f"[download] {setting.name}: preparing local-only checkpoints "
              f"({', '.join(m.role + ':' + m.source for m in local)}); nothing to download",
              file=sys.stderr)
    paths.update(resolve_paths(setting, local_dir=str(ld) if ld else None))
    return paths


def main(argv: Optional[list[str]] = None) -> int:
    from specpilot import settings as S

    parser = argparse.ArgumentParser(
        prog="download_models.sh",
        description="Download a setting's target and drafter at their pinned revisions "
                    "(resolving and pinning unpinned ones), resumable, then check the files.")
    parser.add_argument("setting", help="a folder name under settings/ (or a path)")
    parser.add_argument("--local-dir", default=None,
                        help="put repos in DIR/<owner>/<name> instead of the Hugging Face cache "
                             "(also $SPECPILOT_LOCAL_DIR; pass the same DIR to serve/bench/validate)")
    parser.add_argument("--verify-hashes", action="store_true",
                        help="also compare the sha256 of every LFS file (slow for big models)")
    args = parser.parse_args(argv)
    try:
        setting = S.load(args.setting)
    except S.SettingsError as e:
        parser.print_usage(sys.stderr)
        print(f"download_models.sh: error: {e}", file=sys.stderr)
        return 2
    try:
        paths = download(setting, args.local_dir, args.verify_hashes)
    except (DownloadError, FileNotFoundError) as e:
        print(f"download_models.sh: error: {e}", file=sys.stderr)
        return 1
    for role, p in paths.items():
        print(f"{role}\t{p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
