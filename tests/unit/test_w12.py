"""W12 lossless 12-bit bf16 format: CPU reference encoder/decoder and tools."""
import json

import pytest
import torch
from safetensors.torch import save_file

from specpilot.w12 import bitwise_equal, check, convert, decode, decode_swar, encode, encode_auto, load_w12
from specpilot.w12.format import ESC_THRESHOLD, PAD_K, TILE_K, TILE_N


def bits(vals):
    """int list of raw 16-bit patterns -> bf16 tensor."""
    t = torch.tensor([v - 0x10000 if v >= 0x8000 else v for v in vals], dtype=torch.int16)
    return t.view(torch.bfloat16)


EDGE = [
    0x0000, 0x8000,            # +0, -0
    0x0001, 0x807F, 0x0040,    # subnormals (smallest, largest negative, mid)
    0x7F80, 0xFF80,            # +-Inf
    0x7FC0, 0xFFC1, 0x7F81, 0x7FFF, 0xFF85,  # quiet/signalling NaNs with payloads
    0x7F7F, 0xFF7F,            # largest normals
    0x0080, 0x8080,            # smallest normals
    0x3F80, 0xBF80,            # +-1
]


def roundtrip(x, per_row=False):
    w = encode(x, per_row=per_row)
    y = decode(w)
    assert bitwise_equal(y, x), "round trip not bitwise identical"
    assert bitwise_equal(decode_swar(w), x), "SWAR decode not bitwise identical"
    return w


def test_edge_values_alone_and_mixed():
    e = bits(EDGE)
    roundtrip(e)
    roundtrip(e.reshape(2, -1))
    # edges sprinkled into a realistic tensor (window set by the bulk), including every position
    x = (torch.randn(70, 600) * 0.02).bfloat16()
    idx = torch.randperm(x.numel())[: len(EDGE) * 5]
    x.view(-1)[idx] = e.repeat(5)
    w = roundtrip(x)
    roundtrip(x, per_row=True)
    # code 7 stores every value with e >> 1 == 0 exactly (zeros, subnormals, the smallest
    # normals: 7 of the 18 edges); the rest but +-1 lie outside the bulk's window and escape
    free = sum(1 for v in EDGE if (v >> 8) & 0x7F == 0)
    assert free == 7 and w.n_escapes >= (len(EDGE) - free - 2) * 5


def test_values_just_outside_window():
    x = (torch.randn(64, 256) * 0.02).bfloat16()
    w = encode(x)
    hb = int(w.hb[0])
    lo_e, hi_e = 2 * hb, 2 * hb + 13           # the 14-exponent window
    u = x.view(torch.int16)
    cases = []
    for e in (lo_e - 1, lo_e, hi_e, hi_e + 1):
        for s in (0, 1):
            for m in (0, 1, 0x7F):
                cases.append((s << 15) | (e << 7) | m)
    vals = bits(cases).view(torch.int16)
    u.view(-1)[: len(cases)] = vals
    w2 = roundtrip(x)
    assert int(w2.hb[0]) == hb  # window unchanged by the few planted values
    # in-window ones cost nothing; exponents lo_e-1 and hi_e+1 escape (12 planted)
    assert w2.n_escapes >= 12


@pytest.mark.parametrize("scale", [1e-30, 1e-4, 0.02, 1.0, 300.0, 1e30])
@pytest.mark.parametrize("shape", [(1, 7), (3, 33), (130, 1100), (5, 4, 96)])
def test_random_normal(scale, shape):
    x = (torch.randn(*shape) * scale).bfloat16()
    w = roundtrip(x)
    roundtrip(x, per_row=True)
    if x.numel() > 10000:
        assert w.escape_rate < 2e-3
        assert w.bits_per_weight < 12.5


def test_layout_sizes_and_escape_code():
    x = (torch.randn(100, 1000) * 0.02).bfloat16()
    w = encode(x)
    Kp = ((1000 + PAD_K - 1) // PAD_K) * PAD_K
    assert w.L.shape == (100, Kp) and w.H.shape == (100, Kp // 2)
    assert w.L.dtype == w.H.dtype == torch.uint8 and (Kp // 2) % 16 == 0
    n_tiles = ((100 + TILE_N - 1) // TILE_N) * ((Kp + TILE_K - 1) // TILE_K)
    assert w.esc_off.numel() == n_tiles + 1 and int(w.esc_off[-1]) == w.n_escapes
    # signed zeros and subnormals use code 7 without side entries
    z = torch.zeros(4, 64, dtype=torch.bfloat16)
    z[1] = -0.0
    z[2, :32] = 1.0
    z[3, :16] = bits([0x0001, 0x807F, 0x0080, 0x80FF] * 4)
    wz = roundtrip(z)
    assert wz.n_escapes == 0


def test_h_plane_bit_layout():
    """The documented H word layout, bit by bit: pair column c = 4q + i holds a = column c and
    b = column Kp/2 + c; d(a) at bits 4i..4i+2, d(b) at 16+4i.., sign(a) at 8i+7, sign(b) at 8i+3."""
    from specpilot.w12.format import pack_h, unpack_h
    g = torch.Generator().manual_seed(1)
    d = torch.randint(0, 8, (3, 64), generator=g)
    s = torch.randint(0, 2, (3, 64), generator=g)
    H = pack_h(d, s)
    assert H.shape == (3, 32) and H.dtype == torch.uint8
    for r in range(3):
        for c in range(32):
            q, i = divmod(c, 4)
            word = sum(int(H[r, 4 * q + k]) << (8 * k) for k in range(4))
            assert (word >> (4 * i)) & 7 == d[r, c] and (word >> (16 + 4 * i)) & 7 == d[r, 32 + c]
            assert (word >> (8 * i + 7)) & 1 == s[r, c] and (word >> (8 * i + 3)) & 1 == s[r, 32 + c]
    d2, s2 = unpack_h(H)
    assert torch.equal(d2, d.int()) and torch.equal(s2, s.int())


def test_chunked_encode_equals_one_piece(monkeypatch):
    """Huge tensors are encoded CHUNK weights at a time: the same bytes as in one piece."""
    import specpilot.w12.format as F
    x = (torch.randn(300, 700) * 0.02).bfloat16()
    x.view(-1)[torch.randperm(x.numel())[:200]] = bits(EDGE * 12)[:200]
    ref = F.encode(x, per_row=True)
    monkeypatch.setattr(F, "CHUNK", 64 * 704)            # 64 rows per chunk: 5 chunks
    got = F.encode(x, per_row=True)
    for part in ("L", "H", "hb", "esc_off", "esc"):
        assert torch.equal(getattr(ref, part), getattr(got, part)), part


@pytest.mark.parametrize("per_row", [False, True])
def test_chunked_decode_equals_one_piece(monkeypatch, per_row):
    """decode_chunked (a W12 checkpoint's load path) decodes row chunks cut at the escape tiles'
    rows: the same bits as decode in one piece, also for a 3-D weight and a last partial
    chunk."""
    import specpilot.w12.format as F
    x = (torch.randn(300, 1100) * 0.02).bfloat16()
    x.view(-1)[torch.randperm(x.numel())[:400]] = bits(EDGE * 34)[:400]
    w = F.encode(x, per_row=per_row)
    monkeypatch.setattr(F, "CHUNK", 64 * 1100)          # 64 rows per chunk: 5 chunks, 44 last
    assert bitwise_equal(F.decode_chunked(w), F.decode(w))
    y = (torch.randn(130, 2, 40) * 0.02).bfloat16()
    y.view(-1)[:7] = bits(EDGE)[:7]
    w3 = F.encode(y)
    assert bitwise_equal(F.decode_chunked(w3), y) and F.decode_chunked(w3).shape == y.shape
    with pytest.raises(ValueError, match="multiple of"):
        F.row_slice(w, 10, 70)
    z = (torch.randn(100) * 0.02).bfloat16()   # a 1-D tensor: one row, its shape kept
    z[:7] = bits(EDGE)[:7]
    assert bitwise_equal(F.decode_chunked(F.encode(z)), z)


def test_bitwise_equal_any_dtype_and_empty_tensors():
    """bitwise_equal compares raw bytes: 0-d, odd-length byte and bool tensors (a checkpoint's
    scalars and masks); an empty weight encodes and decodes."""
    import specpilot.w12.format as F
    for t in (torch.tensor(1.5), torch.tensor([1, 2, 3], dtype=torch.uint8),
              torch.tensor([True, False, True, True, False])):
        assert bitwise_equal(t.clone(), t)
    assert not bitwise_equal(torch.tensor([1, 2, 3], dtype=torch.uint8),
                             torch.tensor([1, 2, 4], dtype=torch.uint8))
    assert not bitwise_equal(bits([0x0000]), bits([0x8000]))   # +0 and -0 differ
    e = torch.zeros(0, 70, dtype=torch.bfloat16)
    assert bitwise_equal(F.decode(F.encode(e)), e) and F.decode(F.encode(e)).shape == e.shape


def test_all_escape_and_threshold_fallback():
    # exponents spread uniformly over 60 binades: far too many escapes -> stays bf16
    m = torch.rand(256, 256) * 2 - 1
    x = (m * torch.pow(2.0, torch.randint(-30, 30, (256, 256)).float())).bfloat16()
    w = roundtrip(x)  # still lossless when forced
    assert w.escape_rate > ESC_THRESHOLD
    got, rate = encode_auto(x)
    assert got is None and rate > ESC_THRESHOLD
    # rows at wildly different scales: per-tensor fails, per-row succeeds
    y = (torch.randn(64, 512) * torch.pow(2.0, torch.arange(64).float() - 32).view(-1, 1)).bfloat16()
    got, rate = encode_auto(y)
    assert rate > ESC_THRESHOLD and got is not None and got.per_row
    assert bitwise_equal(decode(got), y) and bitwise_equal(decode_swar(got), y)
    # many escapes concentrated in one tile
    z = (torch.randn(128, 1024) * 0.02).bfloat16()
    z[:64, :512] = float("inf")
    roundtrip(z)


def _tiny_ckpt(path):
    g = torch.Generator().manual_seed(0)
    t = {
        "model.embed_tokens.weight": (torch.randn(50, 64, generator=g) * 0.02).bfloat16(),
        "model.layers.0.input_layernorm.weight": torch.ones(64, dtype=torch.bfloat16),
        "model.layers.0.self_attn.q_proj.weight": (torch.randn(64, 64, generator=g) * 0.05).bfloat16(),
        "model.layers.0.mlp.down_proj.weight": (torch.randn(256, 600, generator=g) * 0.02).bfloat16(),
        "model.layers.0.self_attn.q_proj.bias": (torch.randn(64, generator=g)).bfloat16(),
        "lm_head.weight": (torch.randn(50, 64, generator=g) * 0.02).bfloat16(),
        "model.layers.0.mlp.gate_proj.weight": bits(EDGE * 4).reshape(8, 9),
    }
    t["model.layers.0.mlp.down_proj.weight"][0, :len(EDGE)] = bits(EDGE)
    path.mkdir(parents=True, exist_ok=True)
    save_file(t, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return t


def test_check_summary_line(tmp_path):
    t = _tiny_ckpt(tmp_path / "hf")
    lines = []
    s = check(str(tmp_path / "hf"), log=lines.append)
    assert lines[-1] == f"lossless: {len(t)}/{len(t)} tensors bitwise identical"
    gpu = torch.cuda.is_available()  # with CUDA (and triton) the kernel decode is checked too
    assert any(("GPU kernel decode: checked" if gpu else "GPU kernel decode: not available")
               in ln for ln in lines)
    assert s["ok"] == s["total"] == len(t)


def test_convert_and_load(tmp_path):
    t = _tiny_ckpt(tmp_path / "hf")
    meta = convert(str(tmp_path / "hf"), str(tmp_path / "w12"), log=lambda *_: None)
    kinds = {n: i["kind"] for n, i in meta["tensors"].items()}
    assert kinds["model.embed_tokens.weight"] == "raw"
    assert kinds["model.layers.0.input_layernorm.weight"] == "raw"
    assert kinds["model.layers.0.self_attn.q_proj.bias"] == "raw"
    assert kinds["lm_head.weight"] == "w12"
    assert kinds["model.layers.0.mlp.down_proj.weight"] == "w12"
    assert kinds["model.layers.0.mlp.gate_proj.weight"] == "raw"  # all edge values: over threshold
    assert (tmp_path / "w12" / "config.json").exists()
    dec = load_w12(str(tmp_path / "w12"))
    assert set(dec) == set(t)
    for n, v in t.items():
        assert bitwise_equal(dec[n], v), n


def test_convert_in_shards(tmp_path):
    """Above shard_bytes convert writes shards as it goes and their index; they load bit for bit
    (load_w12, the loader's checkpoint_files / open_tensors); converting again into the same
    folder as one file removes the shards."""
    import os

    from specpilot.models.loader import checkpoint_files, open_tensors
    from specpilot.w12.convert import W12_FILE, W12_INDEX, is_w12_checkpoint
    t = _tiny_ckpt(tmp_path / "hf")
    out = tmp_path / "w12"
    meta = convert(str(tmp_path / "hf"), str(out), log=lambda *_: None, shard_bytes=60000)
    shards = sorted(f for f in os.listdir(out) if f.startswith("model.w12-"))
    assert len(shards) >= 2 and (out / W12_INDEX).is_file() and not (out / W12_FILE).exists()
    assert is_w12_checkpoint(str(out)) and set(meta["tensors"]) == set(t)
    dec, info = load_w12(str(out), with_info=True)
    assert set(dec) == set(t) and all(bitwise_equal(dec[n], v) for n, v in t.items())
    assert info["tensors"] == meta["tensors"]
    files = checkpoint_files(str(out))
    assert set(files) == set(t) and len(set(files.values())) == len(shards)
    for name, fn in files.items():
        with open_tensors(fn) as get:
            assert bitwise_equal(get(name), t[name]), name
    index = json.loads((out / W12_INDEX).read_text())
    (out / W12_INDEX).write_text(json.dumps(dict(index, metadata={"format": "W12-v1"})))
    with pytest.raises(ValueError, match="W12 format 'W12-v1'.*convert the bf16 checkpoint"):
        load_w12(str(out))
    convert(str(tmp_path / "hf"), str(out), log=lambda *_: None)
    assert (out / W12_FILE).is_file() and not (out / W12_INDEX).exists()
    assert not any(f.startswith("model.w12-") for f in os.listdir(out))
    assert all(bitwise_equal(load_w12(str(out))[n], v) for n, v in t.items())
    (out / "model.safetensors").write_bytes(b"")   # a bf16 file beside it: not a W12 folder
    assert not is_w12_checkpoint(str(out))


def test_cli_convert_with_progress(tmp_path, capsys):
    """convert's CLI: a progress bar on stderr (one step per tensor), the written folder reloads
    bit for bit (--verify), and the same checkpoint as the library call."""
    from specpilot.w12.__main__ import main
    _tiny_ckpt(tmp_path / "hf")
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "w12"), "--verify"]) == 0
    out = capsys.readouterr()
    assert out.out.strip().splitlines()[-1] == "lossless: 7/7 tensors bitwise identical"
    assert "W12 convert" in out.err and "7/7" in out.err
    convert(str(tmp_path / "hf"), str(tmp_path / "lib"), log=lambda *_: None)
    a, b = load_w12(str(tmp_path / "w12")), load_w12(str(tmp_path / "lib"))
    assert all(bitwise_equal(a[n], b[n]) for n in a)


def test_cli_check(tmp_path, capsys):
    from specpilot.w12.__main__ import main
    _tiny_ckpt(tmp_path / "hf")
    assert main(["check", str(tmp_path / "hf"), "--quiet"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "lossless: 7/7 tensors bitwise identical"
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "o"), "--verify"]) == 0


def test_check_with_scalars_empty_and_narrow_tensors(tmp_path):
    """check and convert --verify on a checkpoint with a 0-d scale, a byte mask of odd length,
    an empty weight and a narrow-K conv weight: all lossless; the conv weight stays bf16 (W12
    padded to 32 columns would be larger)."""
    from specpilot.w12.__main__ import main
    from specpilot.w12.convert import convert_tensor
    t = _tiny_ckpt(tmp_path / "hf")
    t.update({"model.layers.0.logit_scale": torch.tensor(0.5),
              "model.layers.0.mask": torch.tensor([1, 0, 1], dtype=torch.uint8),
              "model.layers.0.empty_proj.weight": torch.zeros(0, 70, dtype=torch.bfloat16),
              "model.layers.0.conv1d.weight": (torch.randn(64, 1, 4) * 0.3).bfloat16()})
    save_file(t, str(tmp_path / "hf" / "model.safetensors"))
    w, info = convert_tensor("model.layers.0.conv1d.weight", t["model.layers.0.conv1d.weight"])
    assert w is None and info["reason"] == "no smaller than bf16"
    lines = []
    s = check(str(tmp_path / "hf"), log=lines.append)
    assert s["ok"] == s["total"] == len(t) == 11
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "o"), "--verify",
                 "--no-progress"]) == 0
    dec = load_w12(str(tmp_path / "o"))
    assert set(dec) == set(t) and all(bitwise_equal(dec[n], v) for n, v in t.items())


def test_convert_reads_what_the_loader_reads(tmp_path):
    """Only the checkpoint's own files are converted: model.safetensors (or the shard index's
    files), not another *.safetensors beside them (a consolidated copy, an adapter), which the
    loader would refuse as unused tensors."""
    from specpilot.models.loader import checkpoint_files
    t = _tiny_ckpt(tmp_path / "hf")
    save_file({"tok_embeddings.weight": torch.zeros(4, 4, dtype=torch.bfloat16)},
              str(tmp_path / "hf" / "consolidated.safetensors"))
    meta = convert(str(tmp_path / "hf"), str(tmp_path / "w12"), log=lambda *_: None)
    assert set(meta["tensors"]) == set(t) == set(checkpoint_files(str(tmp_path / "w12")))
    sh = tmp_path / "sharded"   # an index over two shards, and a stray file beside them
    sh.mkdir()
    names = sorted(t)
    for i, part in enumerate((names[:3], names[3:])):
        save_file({n: t[n] for n in part}, str(sh / f"model-0000{i + 1}-of-00002.safetensors"))
    (sh / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        n: f"model-0000{1 if n in names[:3] else 2}-of-00002.safetensors" for n in names}}))
    save_file({"extra.weight": torch.zeros(4, 4, dtype=torch.bfloat16)},
              str(sh / "adapter.safetensors"))
    meta = convert(str(sh), str(tmp_path / "w12s"), log=lambda *_: None)
    assert set(meta["tensors"]) == set(t)


def test_convert_bad_input_loses_nothing(tmp_path, capsys):
    """A missing or empty source, a W12 folder as the source, or the source as the output: an
    error before anything is written (a converted folder already there stays whole); the CLI
    says `error: ...` and exits 2 (1 is kept for "not lossless")."""
    import os

    from specpilot.w12.__main__ import main
    t = _tiny_ckpt(tmp_path / "hf")
    out = tmp_path / "w12"
    convert(str(tmp_path / "hf"), str(out), log=lambda *_: None)
    before = sorted(os.listdir(out))
    (tmp_path / "empty").mkdir()
    for src, err in ((tmp_path / "typo", FileNotFoundError), (tmp_path / "empty", FileNotFoundError),
                     (out, ValueError)):
        with pytest.raises(err):
            convert(str(src), str(out), log=lambda *_: None)
        assert sorted(os.listdir(out)) == before
    assert all(bitwise_equal(load_w12(str(out))[n], v) for n, v in t.items())
    hf_before = sorted(os.listdir(tmp_path / "hf"))
    with pytest.raises(ValueError, match="source folder"):
        convert(str(tmp_path / "hf"), str(tmp_path / "hf" / "."), log=lambda *_: None)
    assert sorted(os.listdir(tmp_path / "hf")) == hf_before
    capsys.readouterr()
    assert main(["convert", str(tmp_path / "typo"), str(tmp_path / "o2")]) == 2
    assert main(["check", str(out)]) == 2
    err = capsys.readouterr()
    assert "error: " in err.err and "Traceback" not in err.err and "W12 checkpoint" in err.err
    assert err.out == "" and not (tmp_path / "o2").exists()
