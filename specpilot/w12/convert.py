"""W12 checkpoint conversion, loading and the lossless check (CPU reference)."""
from __future__ import annotations

import json
import os
import shutil
from collections import OrderedDict

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from .format import (ESC_THRESHOLD, FORMAT_NAME, W12Tensor, bitwise_equal, decode, decode_chunked,
                     decode_swar, encode_auto)

W12_FILE = "model.w12.safetensors"             # a checkpoint in one file
W12_INDEX = "model.w12.safetensors.index.json"  # or shards (SHARD_BYTES each) and their index
SHARD_BYTES = 4 << 30
PARTS = ("L", "H", "hb", "esc_off", "esc")
GPU_NOTE = ("GPU kernel decode: not available (needs CUDA and Triton); round trips below use the "
            "CPU reference decoder and the CPU emulation of the kernel's 2-weights-per-32-bit "
            "SWAR decode (both must match)")
GPU_NOTE_ON = ("GPU kernel decode: checked; round trips below use the CPU reference decoder, the "
               "CPU emulation of the kernel's SWAR decode and the Triton decode kernel on CUDA "
               "(kernel.decode_w12_gpu, the GEMM's decode routine); all three must match")


def _gpu_decoder():
    """The Triton decode kernel as ``W12Tensor -> bf16 [N, K]`` on CUDA, or None without CUDA or
    Triton (or under TRITON_INTERPRET)."""
    from . import kernel
    if not (kernel.HAS_TRITON and not kernel.INTERPRET and torch.cuda.is_available()):
        return None
    return lambda w: kernel.decode_w12_gpu(kernel.prepare(w, "cuda")).cpu()


def should_code(name: str, t: torch.Tensor) -> bool:
    """Linear weights (incl. lm_head) become W12; embeddings, norms, biases, non-bf16 stay."""
    low = name.lower()
    if t.dtype != torch.bfloat16 or t.dim() < 2 or not low.endswith(".weight"):
        return False
    return not any(k in low for k in ("embed", "norm", "wte", "wpe"))


def tensor_class(name: str) -> str:
    parts = name.split(".")
    if parts[-1] in ("weight", "bias") and len(parts) > 1:
        return parts[-2] + ("" if parts[-1] == "weight" else ".bias")
    return parts[-1]


def _source_map(hf_dir: str) -> dict:
    """Tensor name -> file of the bf16 checkpoint to convert, as the loader reads it
    (hf_weight_map: the shard index, else model.safetensors; not every *.safetensors in the
    folder). A W12 checkpoint is refused: convert and check take the bf16 folder."""
    if not os.path.isdir(hf_dir):
        raise FileNotFoundError(f"{hf_dir}: no such folder")
    if is_w12_checkpoint(hf_dir):
        raise ValueError(f"{hf_dir} is a W12 checkpoint; convert and check take the bf16 "
                         f"checkpoint it was made from")
    return hf_weight_map(hf_dir)


def hf_weight_map(path: str) -> dict:
    """Tensor name -> safetensors file of a Hugging Face checkpoint folder: its shard index's
    map, else model.safetensors' tensors (other *.safetensors beside them are not read)."""
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index) as f:
            return {name: os.path.join(path, fn) for name, fn in json.load(f)["weight_map"].items()}
    single = os.path.join(path, "model.safetensors")
    if not os.path.isfile(single):
        raise FileNotFoundError(f"{path!r} has neither model.safetensors nor an index "
                                f"(nor a W12 checkpoint: model.w12.safetensors or its shards)")
    with safe_open(single, framework="pt") as f:
        return {name: single for name in f.keys()}


def _iter_tensors(wmap: dict):
    """(name, tensor) of a name -> file map, one file open at a time."""
    by_file: dict = {}
    for name, fn in wmap.items():
        by_file.setdefault(fn, []).append(name)
    for fn in sorted(by_file):
        with safe_open(fn, framework="pt") as sf:
            for name in by_file[fn]:
                yield name, sf.get_tensor(name)


def iter_hf_tensors(hf_dir: str):
    """(name, tensor) of the bf16 checkpoint in hf_dir (the tensors _source_map names)."""
    yield from _iter_tensors(_source_map(hf_dir))


def convert_tensor(name: str, t: torch.Tensor, threshold: float = ESC_THRESHOLD):
    """Returns (W12Tensor | None, info dict). None means the tensor stays bf16."""
    info = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "class": tensor_class(name)}
    if not should_code(name, t):
        info.update(kind="raw", reason="not a linear weight")
        return None, info
    w, rate = encode_auto(t, threshold)
    if w is None:
        info.update(kind="raw", reason="escape threshold", escape_rate=rate)
        return None, info
    if w.bits_per_weight >= 8 * t.element_size():   # K padded to PAD_K: no smaller than bf16
        info.update(kind="raw", reason="no smaller than bf16")
        return None, info
    info.update(kind="w12", base="row" if w.per_row else "tensor", escape_rate=w.escape_rate,
                n_escapes=w.n_escapes, bits_per_weight=w.bits_per_weight)
    return w, info


def _shard_name(i: int) -> str:
    return f"model.w12-{i:05d}.safetensors"


def convert(hf_dir: str, out_dir: str, threshold: float = ESC_THRESHOLD, log=print,
            device=None, progress: bool = False, shard_bytes: int = SHARD_BYTES) -> dict:
    """Write a W12 checkpoint: ``model.w12.safetensors``, or when it would exceed
    ``shard_bytes`` shards of about that size written as the tensors are encoded (memory stays
    bounded by one shard) and their index ``model.w12.safetensors.index.json``; plus w12.json;
    other files copied as is. Every file's safetensors metadata ``w12`` holds the format and its
    tensors' entries. ``device``: where each tensor is encoded (default: where it loads, the
    CPU; "cuda" is much faster on a 27B model; the result is the same); ``progress``: a tqdm
    bar on stderr."""
    from tqdm import tqdm

    wmap = _source_map(hf_dir)   # checked before out_dir is touched (a typo costs nothing)
    if os.path.isdir(out_dir) and os.path.samefile(hf_dir, out_dir):
        raise ValueError(f"{out_dir} is the source folder; write the W12 checkpoint elsewhere")
    os.makedirs(out_dir, exist_ok=True)
    for fn in os.listdir(out_dir):   # a previous conversion's files: not mixed with this one's
        if fn.startswith("model.w12") and (fn.endswith(".safetensors") or fn == W12_INDEX):
            os.remove(os.path.join(out_dir, fn))
    index, weight_map, shards = {}, {}, []
    cur: "OrderedDict[str, torch.Tensor]" = OrderedDict()
    cur_info: dict = {}
    cur_bytes = 0

    def flush():
        nonlocal cur, cur_info, cur_bytes
        fn = _shard_name(len(shards) + 1)
        meta = {"format": FORMAT_NAME, "escape_threshold": threshold, "tensors": cur_info}
        save_file(cur, os.path.join(out_dir, fn), metadata={"w12": json.dumps(meta)})
        shards.append(fn)
        weight_map.update({name: fn for name in cur_info})
        cur, cur_info, cur_bytes = OrderedDict(), {}, 0

    bar = tqdm(total=len(wmap) if progress else 0, unit="tensor",
               desc="W12 convert", disable=not progress)
    for name, t in _iter_tensors(wmap):
        w, info = convert_tensor(name, t.to(device) if device is not None else t, threshold)
        stored = {name: t.contiguous()} if w is None else {
            f"{name}.w12.{p}": getattr(w, p).cpu() for p in PARTS}
        cur.update(stored)
        cur_info[name] = info
        cur_bytes += sum(v.numel() * v.element_size() for v in stored.values())
        index[name] = info
        if cur_bytes >= shard_bytes:
            flush()
        bar.update(1)
    bar.close()
    if cur_info or not shards:
        flush()
    meta = {"format": FORMAT_NAME, "escape_threshold": threshold, "tensors": index}
    if len(shards) == 1:   # one file: no index
        os.replace(os.path.join(out_dir, shards[0]), os.path.join(out_dir, W12_FILE))
        written = W12_FILE
    else:
        with open(os.path.join(out_dir, W12_INDEX), "w") as f:
            json.dump({"metadata": {"format": FORMAT_NAME, "escape_threshold": threshold},
                       "weight_map": weight_map}, f, indent=1)
        written = f"{len(shards)} shards ({W12_INDEX})"
    with open(os.path.join(out_dir, "w12.json"), "w") as f:
        json.dump(meta, f, indent=1)
    for fn in os.listdir(hf_dir):
        src = os.path.join(hf_dir, fn)
        if fn.endswith(".safetensors") or fn.endswith(".safetensors.index.json") or not os.path.isfile(src):
            continue
        shutil.copy2(src, os.path.join(out_dir, fn))
    n_w12 = sum(1 for i in index.values() if i["kind"] == "w12")
    log(f"wrote {os.path.join(out_dir, written)}: {n_w12} W12 tensors, "
        f"{len(index) - n_w12} bf16/raw")
    return meta


def is_w12_checkpoint(path: str) -> bool:
    """A folder that ``convert`` wrote: ``model.w12.safetensors`` or the W12 shards' index, and
    no bf16 safetensors (``model.safetensors`` or a shard index) beside it."""
    return ((os.path.isfile(os.path.join(path, W12_FILE))
             or os.path.isfile(os.path.join(path, W12_INDEX)))
            and not os.path.isfile(os.path.join(path, "model.safetensors"))
            and not os.path.isfile(os.path.join(path, "model.safetensors.index.json")))


def w12_files(path: str) -> dict:
    """Tensor name (as in the bf16 checkpoint) -> the W12 file that holds it, for a folder
    ``convert`` wrote (its shards' index, else its one file)."""
    index = os.path.join(path, W12_INDEX)
    if os.path.isfile(index):
        with open(index) as f:
            data = json.load(f)
        _check_format(data.get("metadata", {}).get("format"), index)
        return {name: os.path.join(path, fn) for name, fn in data["weight_map"].items()}
    single = os.path.join(path, W12_FILE)
    with safe_open(single, framework="pt") as sf:
        return {name: single for name in w12_meta(sf, single)["tensors"]}


def w12_meta(sf, path: str) -> dict:
    """The W12 metadata of an open W12 file (``safe_open``), checked to be the format this
    version reads."""
    raw = (sf.metadata() or {}).get("w12")
    if raw is None:
        raise ValueError(f"{path}: no W12 metadata (not written by python -m specpilot.w12 "
                         f"convert)")
    meta = json.loads(raw)
    _check_format(meta.get("format"), path)
    return meta


def _check_format(fmt, path: str) -> None:
    """A W12 file or index of another format version is refused, naming the way out."""
    if fmt != FORMAT_NAME:
        raise ValueError(f"{path}: W12 format {fmt!r}, this version reads {FORMAT_NAME!r} only; "
                         f"convert the bf16 checkpoint again (python -m specpilot.w12 convert)")


def read_tensor(sf, meta: dict, name: str, device=None) -> torch.Tensor:
    """Tensor ``name`` of an open W12 file: a W12 tensor decoded bit for bit (the reference
    decoder, run on ``device`` a row chunk at a time: plain torch ops, fast on a GPU), any
    other as stored."""
    info = meta["tensors"][name]
    if info["kind"] != "w12":
        return sf.get_tensor(name)
    parts = {p: sf.get_tensor(f"{name}.w12.{p}") for p in PARTS}
    return decode_chunked(W12Tensor(tuple(info["shape"]), **parts), device)


def load_w12(out_dir: str, with_info: bool = False):
    """Load a W12 checkpoint (one file or shards), decoding every W12 tensor to bf16 with the
    reference decoder. ``with_info``: also the metadata (w12.json's: every tensor's entry)."""
    files = w12_files(out_dir)
    out = OrderedDict()
    tensors = {}
    for fn in dict.fromkeys(files.values()):
        with safe_open(fn, framework="pt") as sf:
            meta = w12_meta(sf, fn)
            for name in meta["tensors"]:
                out[name] = read_tensor(sf, meta, name)
            tensors.update(meta["tensors"])
    meta = {"format": FORMAT_NAME, "escape_threshold": meta["escape_threshold"],
            "tensors": tensors}
    return (out, meta) if with_info else out


def check(hf_dir: str, threshold: float = ESC_THRESHOLD, log=print, verbose: bool = True) -> dict:
    """Convert in memory, decode, compare bitwise; print per-tensor, per-class and summary lines.

    Decoders: the CPU reference, the CPU SWAR emulation and, with CUDA and Triton, the GPU
    decode kernel; the first line says which."""
    wmap = _source_map(hf_dir)   # a bad folder fails before any output
    gpu_decode = _gpu_decoder()
    log(GPU_NOTE_ON if gpu_decode else GPU_NOTE)
    n_ok = n_tot = 0
    w12_bits = w12_numel = tot_bits = tot_numel = w12_esc = 0
    classes: dict = {}
    if verbose:
        log(f"{'tensor':60s} {'shape':>14s} {'kind':>10s} {'identical':>9s} {'esc_rate':>10s} {'bits/w':>7s}")
    for name, t in _iter_tensors(wmap):
        w, info = convert_tensor(name, t, threshold)
        numel = t.numel()
        if w is None:
            ok = bitwise_equal(t.clone(), t)  # stored verbatim
            bits = 8.0 * t.element_size()
            kind = "raw" if info["reason"] != "escape threshold" else "bf16-keep"
            rate = info.get("escape_rate", float("nan"))
        else:
            ok = bitwise_equal(decode(w), t) and bitwise_equal(decode_swar(w), t)
            if gpu_decode is not None:
                ok = ok and bitwise_equal(gpu_decode(w).reshape(t.shape), t)
            bits, rate = w.bits_per_weight, w.escape_rate
            kind = "w12-" + ("row" if w.per_row else "tens")
            w12_bits += bits * numel
            w12_numel += numel
            w12_esc += w.n_escapes
        n_ok += int(ok)
        n_tot += 1
        tot_bits += bits * numel
        tot_numel += numel
        c = classes.setdefault(info["class"], {"n": 0, "numel": 0, "bits": 0.0, "esc": 0, "kinds": set()})
        c["n"] += 1
        c["numel"] += numel
        c["bits"] += bits * numel
        c["esc"] += w.n_escapes if w is not None else 0
        c["kinds"].add(kind)
        if verbose:
            shape = "x".join(str(s) for s in t.shape)
            log(f"{name:60s} {shape:>14s} {kind:>10s} {'yes' if ok else 'NO':>9s} {rate:10.2e} {bits:7.3f}")
    log("per class:")
    for k, c in classes.items():
        log(f"  {k:24s} n={c['n']:3d} params={c['numel']:>11d} kinds={','.join(sorted(c['kinds']))} "
            f"esc_rate={c['esc'] / max(1, c['numel']):.2e} bits/w={c['bits'] / max(1, c['numel']):.3f}")
    summ = {"ok": n_ok, "total": n_tot,
            "w12_params": w12_numel, "w12_escape_rate": w12_esc / max(1, w12_numel),
            "w12_bits_per_weight": w12_bits / max(1, w12_numel),
            "all_bits_per_weight": tot_bits / max(1, tot_numel), "all_params": tot_numel}
    log(f"W12 tensors: {w12_numel} params, escape rate {summ['w12_escape_rate']:.2e}, "
        f"{summ['w12_bits_per_weight']:.3f} bits/weight; whole checkpoint "
        f"{summ['all_bits_per_weight']:.3f} bits/weight ({tot_numel} params)")
    log(f"lossless: {n_ok}/{n_tot} tensors bitwise identical")
    return summ
