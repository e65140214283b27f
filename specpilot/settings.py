"""Deployment settings: load and validate `settings/<name>/setting.yaml`, render engine flags.

A settings folder is data only (see settings/README.md for the schema):

    settings/<name>/setting.yaml          which checkpoints, GPU, concurrency, engine configs
    settings/<name>/revisions.lock.json   revisions resolved by the first download (optional)

Contracts:
  * `load(name_or_path)` returns a frozen `Setting` or raises `SettingsError` whose message lists
    every problem found, each prefixed with the file and the key (`setting.yaml: target.repo: ...`).
  * Engines: `ar` has no speculative flag; `stock` has exactly ar's flags plus speculative ones,
    with `--speculative-draft-model-path "{drafter}"`; `final` is `extends: stock` plus the flags
    of the mechanisms listed in `landed` (none: then final == stock, and its `note` says so).
  * Flags are keyed by their CLI names (`--dtype`); every key must be a ServerArgs flag, and the
    rendered command line must parse and pass `ServerArgs.validate()`. `{target}` and
    `{drafter}` are replaced by local folders at launch (`resolve_paths`). `--port` is not a
    setting: it is 30000 + the GPU index (scripts/serve.sh).
  * A revision is pinned in setting.yaml or in the lock file (never both, never different);
    unpinned repos are resolved by scripts/download_models.sh, which writes the lock file.

CLI: python -m specpilot.settings {list | check [NAME...] | show NAME | prepare NAME}
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

REPO_ROOT = Path(__file__).resolve().parents[1]
SETTING_FILE = "setting.yaml"
LOCK_FILE = "revisions.lock.json"
ENGINES = ("ar", "stock", "final")
GPUS = {  # settings `gpu` -> substring expected in torch.cuda.get_device_name(); cpu: no GPU
    "h100-80gb": "H100", "h200-141gb": "H200", "rtxpro6000-96gb": "RTX PRO 6000", "cpu": None}
ASSETS_DIR = Path(__file__).resolve().parent / "assets"  # checkpoints shipped in the package
SOURCES = ("hub", "demo", "random", "bundled")
DATASETS = ("gsm8k", "humaneval", "math500", "mbpp", "chat")
ALGORITHMS = ("DFLASH", "DFLASH2", "DSPARK")
SPEC_FLAGS = ("--speculative-algorithm", "--speculative-draft-model-path",
              "--speculative-num-draft-tokens")
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
BENCH_DEFAULTS = {"datasets": list(DATASETS), "num_prompts": 32, "concurrency": [1],
                  "max_new_tokens": 512, "output_len": "natural", "warmup_requests": 4,
                  "chat_template_kwargs": {}}
VALIDATE_DEFAULTS = {"datasets": list(DATASETS), "num_prompts": 2, "max_new_tokens": 128,
                     "near_tie_gap": 0.5}


class SettingsError(ValueError):
    """A settings folder is invalid; the message names every problem found."""


@dataclass(frozen=True)
class Model:
    role: str  # target | drafter
    source: str  # hub | demo | random | bundled
    repo: Optional[str]  # Hugging Face repo id (hub; informational for demo)
    revision: Optional[str]  # pinned commit (setting.yaml or lock file); None: not pinned yet
    card: Optional[str] = None
    algorithm: Optional[str] = None  # drafter only: DFLASH | DFLASH2 | DSPARK
    random: Optional[dict] = None  # source random: make_random_drafter kwargs
    asset: Optional[str] = None  # source bundled: a folder under specpilot/assets/


@dataclass(frozen=True)
class Setting:
    name: str
    folder: Path
    description: str
    gpu: str
    concurrency: int
    target: Model
    drafter: Optional[Model]
    engines: dict  # engine -> {"flags": {flag: value}, "note": str, "landed": [...]} (resolved)
    bench: dict
    validate: dict
    lock: dict  # repo -> {"revision": sha, "files": {...}, ...}

    @property
    def device(self) -> str:
        return "cpu" if self.gpu == "cpu" else "cuda"

    @property
    def lock_path(self) -> Path:
        return self.folder / LOCK_FILE

    def flags(self, engine: str) -> dict:
        if engine not in self.engines:
            raise SettingsError(f"{self.name}: unknown engine {engine!r}; choose from {ENGINES}")
        return dict(self.engines[engine]["flags"])

    def models(self) -> list[Model]:
        return [m for m in (self.target, self.drafter) if m is not None]


def settings_root() -> Path:
    env = os.environ.get("SPECPILOT_SETTINGS_DIR")
    return Path(env).expanduser() if env else REPO_ROOT / "settings"


def list_settings(root: Optional[Path] = None) -> list[str]:
    root = root or settings_root()
    return sorted(p.name for p in root.iterdir() if (p / SETTING_FILE).is_file()) if root.is_dir() else []


def caller_path(p) -> Path:
    """A user-given path; relative ones are relative to the caller's directory, which the shell
    scripts keep in $SPECPILOT_CALLER_CWD (they cd to the repo root before Python starts)."""
    p = Path(p).expanduser()
    return p if p.is_absolute() else Path(os.environ.get("SPECPILOT_CALLER_CWD") or ".") / p


def find(name_or_path: str) -> Path:
    """The folder of a setting given by name (under settings_root()) or by path."""
    p = caller_path(name_or_path)
    if (p / SETTING_FILE).is_file():
        return p.resolve()
    q = settings_root() / name_or_path
    if (q / SETTING_FILE).is_file():
        return q.resolve()
    known = ", ".join(list_settings()) or "(none)"
    raise SettingsError(f"no setting {name_or_path!r}: expected {q / SETTING_FILE}. Known: {known}")


def _server_flag_names() -> dict[str, bool]:
    from specpilot.config import ServerArgs

    return {"--" + f.name.replace("_", "-"): f.type in ("bool", bool)
            for f in dataclasses.fields(ServerArgs)}


# flags a landed mechanism of `final` may not change: what is served, where, and the drafter
FIXED_FLAGS = {"--port", "--model-path", "--device", "--speculative-algorithm",
               "--speculative-draft-model-path"}


def _check_flags(where: str, flags: dict, known: dict[str, bool], errors: list[str]) -> None:
    """Each flag a server flag with a scalar value; a switch's value a bool (a quoted "false"
    would render the switch on)."""
    for flag, value in flags.items():
        if flag not in known:
            errors.append(f"{where}: {flag!r} is not a server flag "
                          "(python -m specpilot.launch_server --help)")
        elif isinstance(value, (dict, list)) or value is None:
            errors.append(f"{where}.{flag}: must be a scalar")
        elif known[flag] and not isinstance(value, bool):
            errors.append(f"{where}.{flag}: a switch takes true or false, got {value!r}")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # raise instead of exiting, so the loader can report it
        raise ValueError(message)


def parse_server_args(argv: list[str]):
    """ServerArgs from a command line; ValueError (not SystemExit) when it is wrong."""
    from specpilot.config import ServerArgs

    parser = _Parser(prog="launch_server", add_help=False)
    ServerArgs.add_cli_args(parser)
    args = ServerArgs(**vars(parser.parse_args(argv)))
    args.validate()
    return args


def render_flags(flags: dict, paths: Optional[dict] = None) -> list[str]:
    """{flag: value} -> argv; `{target}` / `{drafter}` filled from paths; False booleans dropped."""
    paths = paths or {}
    bool_flags = _server_flag_names()
    argv: list[str] = []
    for flag, value in flags.items():
        if bool_flags.get(flag):
            if value:
                argv.append(flag)
            continue
        if isinstance(value, str):
            for role in ("target", "drafter"):
                if "{" + role + "}" in value:
                    if role not in paths:
                        raise SettingsError(f"{flag} needs the {role} path, which was not resolved")
                    value = value.replace("{" + role + "}", str(paths[role]))
        argv += [flag, str(value)]
    return argv


# ----------------------------------------------------------------------------------- loading
def _model(raw: Any, role: str, lock: dict, errors: list[str]) -> Optional[Model]:
    where = f"{SETTING_FILE}: {role}"
    if not isinstance(raw, dict):
        errors.append(f"{where}: must be a mapping with repo/revision "
                      "(or source: demo|random|bundled)")
        return None
    known = {"source", "repo", "revision", "card", "algorithm", "random", "asset"}
    for k in sorted(set(raw) - known):
        errors.append(f"{where}.{k}: unknown key (known: {', '.join(sorted(known))})")
    source = raw.get("source", "hub")
    repo, rev = raw.get("repo"), raw.get("revision")
    if source not in SOURCES:
        errors.append(f"{where}.source: {source!r} is not one of {SOURCES}")
    if source == "hub" or repo is not None:
        if not isinstance(repo, str) or not REPO_RE.match(repo):
            errors.append(f"{where}.repo: {repo!r} is not a Hugging Face repo id (owner/name)")
    if rev is not None and (not isinstance(rev, str) or not SHA_RE.match(rev)):
        errors.append(f"{where}.revision: {rev!r} must be a 40-hex commit id or null")
    locked = (lock.get(repo) or {}).get("revision") if isinstance(repo, str) else None
    if source == "hub" and rev and locked and rev != locked:
        errors.append(f"{where}.revision: {rev} differs from {LOCK_FILE} ({locked}); keep one")
    algo = raw.get("algorithm")
    if role == "drafter" and algo not in ALGORITHMS:
        errors.append(f"{where}.algorithm: {algo!r} is not one of {ALGORITHMS}")
    rnd = raw.get("random")
    if source == "random" and not isinstance(rnd, dict):
        errors.append(f"{where}.random: source random needs the drafter's shape parameters")
    asset = raw.get("asset")
    if source == "bundled" and not (isinstance(asset, str) and
                                    (ASSETS_DIR / asset / "config.json").is_file()):
        errors.append(f"{where}.asset: {asset!r} is not a checkpoint folder under {ASSETS_DIR}")
    card = raw.get("card")
    if source == "hub" and not (isinstance(card, str) and card.startswith("https://")):
        errors.append(f"{where}.card: the model card URL is required for hub models")
    return Model(role, source, repo, rev or (locked if source == "hub" else None), card, algo, rnd,
                 asset if source == "bundled" else None)


def _block(raw: Any, defaults: dict, where: str, errors: list[str]) -> dict:
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        errors.append(f"{SETTING_FILE}: {where}: must be a mapping")
        return dict(defaults)
    for k in sorted(set(raw) - set(defaults)):
        errors.append(f"{SETTING_FILE}: {where}.{k}: unknown key (known: {', '.join(defaults)})")
    out = {**defaults, **{k: v for k, v in raw.items() if k in defaults}}
    for ds in out["datasets"] if isinstance(out["datasets"], list) else [None]:
        if ds not in DATASETS:
            errors.append(f"{SETTING_FILE}: {where}.datasets: {ds!r} is not one of {DATASETS}")
    return out


def _check_bench(b: dict, errors: list[str]) -> None:
    w = f"{SETTING_FILE}: bench"
    conc = b["concurrency"]
    if not (isinstance(conc, list) and conc and all(isinstance(c, int) and c >= 1 for c in conc)):
        errors.append(f"{w}.concurrency: must be a non-empty list of integers >= 1")
    for key in ("num_prompts", "max_new_tokens"):
        if not (isinstance(b[key], int) and b[key] >= 1):
            errors.append(f"{w}.{key}: must be an integer >= 1")
    if b["output_len"] not in ("natural", "fixed"):
        errors.append(f"{w}.output_len: must be natural or fixed")


def _engines(raw: Any, target: Optional[Model], drafter: Optional[Model], gpu: str,
             errors: list[str]) -> dict:
    where = f"{SETTING_FILE}: engines"
    if not isinstance(raw, dict) or set(raw) != set(ENGINES):
        got = sorted(map(str, raw)) if isinstance(raw, dict) else type(raw).__name__
        errors.append(f"{where}: must define exactly {ENGINES}, got {got}")
        return {}
    known = _server_flag_names()
    out = {}
    for eng in ("ar", "stock"):
        cfg = raw[eng] if isinstance(raw[eng], dict) else {}
        flags = cfg.get("flags")
        if not isinstance(flags, dict) or not flags:
            errors.append(f"{where}.{eng}.flags: must be a mapping of server flags")
            flags = {}
        for k in sorted(set(cfg) - {"flags", "note"}):
            errors.append(f"{where}.{eng}.{k}: unknown key")
        _check_flags(f"{where}.{eng}.flags", flags, known, errors)
        if "--port" in flags:
            errors.append(f"{where}.{eng}.flags: --port is not a setting (30000 + GPU index)")
        if flags.get("--model-path") != "{target}":
            errors.append(f"{where}.{eng}.flags.--model-path: must be \"{{target}}\"")
        want_dev = "cpu" if gpu == "cpu" else "cuda"
        if flags.get("--device", want_dev) != want_dev:
            errors.append(f"{where}.{eng}.flags.--device: must be {want_dev} for gpu {gpu}")
        out[eng] = {"flags": dict(flags), "note": str(cfg.get("note", "")), "landed": []}
    ar, stock = out["ar"]["flags"], out["stock"]["flags"]
    if any(f in ar for f in SPEC_FLAGS):
        errors.append(f"{where}.ar.flags: the baseline takes no speculative flag")
    if stock.get("--speculative-draft-model-path") != "{drafter}":
        errors.append(f"{where}.stock.flags.--speculative-draft-model-path: must be \"{{drafter}}\"")
    if drafter is not None and stock.get("--speculative-algorithm") != drafter.algorithm:
        errors.append(f"{where}.stock.flags.--speculative-algorithm: must match drafter.algorithm "
                      f"({drafter.algorithm})")
    common = {k: v for k, v in stock.items() if k not in SPEC_FLAGS}
    if common != ar:
        diff = sorted({(k, repr(v)) for k, v in common.items()}
                      ^ {(k, repr(v)) for k, v in ar.items()})
        errors.append(f"{where}.stock.flags: must be ar's flags plus speculative flags only; "
                      f"differs in {diff}")
    fin = raw["final"] if isinstance(raw["final"], dict) else {}
    if fin.get("extends") != "stock":
        errors.append(f"{where}.final.extends: must be stock (final = stock + landed mechanisms)")
    for k in sorted(set(fin) - {"extends", "landed", "note"}):
        errors.append(f"{where}.final.{k}: unknown key (final = stock + the flags of `landed`)")
    landed = fin.get("landed", [])
    flags = dict(stock)
    if not isinstance(landed, list):
        errors.append(f"{where}.final.landed: must be a list")
        landed = []
    for i, mech in enumerate(landed):
        if not (isinstance(mech, dict) and isinstance(mech.get("name"), str)
                and isinstance(mech.get("flags", {}), dict)):
            errors.append(f"{where}.final.landed[{i}]: needs name (str) and flags (mapping)")
            continue
        for k in sorted(set(mech) - {"name", "issue", "flags"}):
            errors.append(f"{where}.final.landed[{i}].{k}: unknown key (known: name, issue, flags)")
        if not mech.get("flags"):
            errors.append(f"{where}.final.landed[{i}].flags: a landed mechanism needs its flags")
        _check_flags(f"{where}.final.landed[{i}].flags", mech.get("flags", {}), known, errors)
        for flag in sorted(set(mech.get("flags", {})) & FIXED_FLAGS):
            errors.append(f"{where}.final.landed[{i}].flags: {flag} is fixed by the setting "
                          "(stock's value)")
        flags.update(mech.get("flags", {}))
    note = str(fin.get("note", "")).strip()
    if not note:
        errors.append(f"{where}.final.note: must say what final is (stock + what has landed)")
    elif not landed and "stock" not in note:
        errors.append(f"{where}.final.note: nothing has landed, so the note must say final == stock")
    out["final"] = {"flags": flags, "note": note, "landed": list(landed)}
    for eng, cfg in out.items():
        try:
            parse_server_args(render_flags(cfg["flags"], {"target": "/t", "drafter": "/d"}))
        except (ValueError, SettingsError) as e:
            errors.append(f"{where}.{eng}.flags: the server rejects them: {e}")
    return out


def load(name_or_path: str) -> Setting:
    import yaml

    folder = find(name_or_path)
    errors: list[str] = []
    try:
        raw = yaml.safe_load((folder / SETTING_FILE).read_text())
    except yaml.YAMLError as e:
        raise SettingsError(f"{folder / SETTING_FILE}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise SettingsError(f"{folder / SETTING_FILE}: must be a YAML mapping")
    lock = {}
    if (folder / LOCK_FILE).is_file():
        try:
            lock = json.loads((folder / LOCK_FILE).read_text())
            bad = [r for r, v in lock.items() if not SHA_RE.match(str((v or {}).get("revision")))]
            if bad:
                errors.append(f"{LOCK_FILE}: entries without a 40-hex revision: {bad}")
        except (ValueError, AttributeError) as e:
            errors.append(f"{LOCK_FILE}: not a JSON object of repo -> {{revision, files}}: {e}")
            lock = {}
    known = {"name", "description", "gpu", "concurrency", "target", "drafter", "engines",
             "bench", "validate"}
    for k in sorted(set(raw) - known):
        errors.append(f"{SETTING_FILE}: {k}: unknown key (known: {', '.join(sorted(known))})")
    if raw.get("name") != folder.name:
        errors.append(f"{SETTING_FILE}: name: {raw.get('name')!r} must equal the folder name "
                      f"{folder.name!r}")
    gpu = raw.get("gpu")
    if not isinstance(gpu, str) or gpu not in GPUS:
        errors.append(f"{SETTING_FILE}: gpu: {gpu!r} is not one of {list(GPUS)}")
    elif not folder.name.startswith(gpu.split("-")[0] + "_"):
        errors.append(f"{SETTING_FILE}: gpu: {gpu} but the name does not start with "
                      f"{gpu.split('-')[0]}_")
    conc = raw.get("concurrency")
    if not (isinstance(conc, int) and conc >= 1):
        errors.append(f"{SETTING_FILE}: concurrency: must be an integer >= 1")
    m = re.match(r"^[a-z0-9]+_c(\d+)_", folder.name)
    if m and int(m.group(1)) != conc:
        errors.append(f"{SETTING_FILE}: concurrency: {conc} but the name says c{m.group(1)}")
    target = _model(raw.get("target"), "target", lock, errors)
    drafter = _model(raw.get("drafter"), "drafter", lock, errors)
    if not isinstance(raw.get("description"), str):
        errors.append(f"{SETTING_FILE}: description: required (one line)")
    bench = _block(raw.get("bench"), BENCH_DEFAULTS, "bench", errors)
    _check_bench(bench, errors)
    validate = _block(raw.get("validate"), VALIDATE_DEFAULTS, "validate", errors)
    if not (isinstance(validate["near_tie_gap"], (int, float)) and validate["near_tie_gap"] >= 0):
        errors.append(f"{SETTING_FILE}: validate.near_tie_gap: must be a number >= 0")
    engines = _engines(raw.get("engines"), target, drafter, gpu, errors)
    if errors:
        raise SettingsError(f"settings folder {folder} is invalid:\n  " + "\n  ".join(errors))
    return Setting(folder.name, folder, raw["description"], gpu, conc, target, drafter, engines,
                   bench, validate, lock)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m specpilot.settings",
        description="Deployment settings (settings/<name>/setting.yaml): list, check, show, prepare.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="names of the settings folders")
    p = sub.add_parser("check", help="validate settings folders (all when no NAME); exit 1 if any is invalid")
    p.add_argument("names", nargs="*")
    p = sub.add_parser("show", help="the checkpoints and each engine's server command line")
    p.add_argument("name")
    p = sub.add_parser("prepare", help="make the local checkpoints that need no hub (demo model, "
                                       "random drafter) and print target/drafter folders")
    p.add_argument("name")
    p.add_argument("--local-dir", default=None, help="where download_models.sh put hub repos")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "list":
            print("\n".join(list_settings()))
        elif args.cmd == "check":
            bad = 0
            for name in args.names or list_settings():
                try:
                    s = load(name)
                    print(f"ok       {s.name}")
                except SettingsError as e:
                    bad += 1
                    print(f"INVALID  {e}")
            return 1 if bad else 0
        elif args.cmd == "show":
            s = load(args.name)
            print(f"{s.name}: {s.description}\n  gpu {s.gpu}, intended concurrency {s.concurrency}")
            for m in s.models():
                print(f"  {m.role}: {m.repo or '-'} ({m.source}) revision {m.revision or 'not pinned'}")
            for eng in ENGINES:
                note = s.engines[eng]["note"]
                print(f"  [{eng}] python -m specpilot.launch_server "
                      + " ".join(render_flags(s.flags(eng), {"target": "{target}",
                                                             "drafter": "{drafter}"}))
                      + (f"\n      # {note}" if note else ""))
        elif args.cmd == "prepare":
            from specpilot.bench.checkpoints import resolve_paths

            paths = resolve_paths(load(args.name), local_dir=args.local_dir, prepare=True)
            print(json.dumps({k: str(v) for k, v in paths.items()}, indent=2))
    except (SettingsError, FileNotFoundError) as e:
        print(f"specpilot.settings: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
