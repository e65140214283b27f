"""Programmatic dependent launch (kernels/pdl.py) in the GEMV and the other Triton kernels.

CPU: the setting, that launches on CPU tensors (the interpreter) never ask for it, and the sm_90
compile of the GEMV and norm kernels with PDL on (the other kernels: test_kernels_compile_sm90):
both instructions present, the wait before every write, the GEMV's look-ahead weight loads and
escape entries before the wait (what it is for), the trigger after the main loop in its mode 2,
and no instruction at all with PDL off. GPU: a graph of dependent norm -> GEMV layers gives the
same bits with and without PDL (tests/e2e/test_graph_path.py: the engines' greedy output)."""

from __future__ import annotations

import json
import os

import pytest
import torch

from specpilot.kernels import pdl


def test_setting_from_env(monkeypatch):
    monkeypatch.delenv("SPECPILOT_PDL", raising=False)
    assert pdl.setting_from_env() is None   # the model runner's default: on where supported
    monkeypatch.setenv("SPECPILOT_PDL", "0")
    assert pdl.setting_from_env() is False
    monkeypatch.setenv("SPECPILOT_PDL", "1")
    assert pdl.setting_from_env() is True
    monkeypatch.setenv("SPECPILOT_PDL", "yes")
    with pytest.raises(ValueError, match="SPECPILOT_PDL must be 0 or 1"):
        pdl.setting_from_env()


def test_cpu_launches_never_use_it(monkeypatch):
    monkeypatch.setattr(pdl, "ENABLED", True)
    t = torch.zeros(4)
    assert not pdl.active(t) and pdl.launch_args(t) == {}
    monkeypatch.setattr(pdl, "ENABLED", False)
    assert pdl.launch_args(t) == {} and pdl.launch_args(t, 2) == {}


def test_launch_args_on_an_active_device(monkeypatch):
    """Where PDL is active: MODE by default, the given mode (the GEMVs' trigger) otherwise."""
    monkeypatch.setattr(pdl, "ENABLED", True)
    monkeypatch.setattr(pdl, "MODE", 2)
    monkeypatch.setattr(pdl, "active", lambda t: True)
    t = torch.zeros(1)
    assert pdl.launch_args(t) == {"PDL": 2, "launch_pdl": True}
    assert pdl.launch_args(t, 3) == {"PDL": 3, "launch_pdl": True}


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                    reason="CPU tensors run Triton kernels only in the interpreter")
def test_kernels_run_with_it_enabled_on_cpu(monkeypatch):
    """ENABLED on a CPU machine changes nothing: the interpreter runs the kernels as before."""
    from specpilot.kernels import norm

    x = torch.randn(3, 64)
    w = torch.randn(64)
    off = norm.rms_norm(x, w, 1e-6)
    monkeypatch.setattr(pdl, "ENABLED", True)
    assert torch.equal(norm.rms_norm(x, w, 1e-6), off)


def _compile_cases():
    """Runs in a subprocess without TRITON_INTERPRET: {case: facts about its PTX}."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from specpilot.kernels import norm
    from specpilot.w12 import gemv
    from tests.unit.sm90 import w12_kernel_signature

    target = GPUTarget("cuda", 90, 32)

    def facts(ptx: str) -> dict:
        body = ptx[ptx.index(".entry"):]
        wait = body.find("griddepcontrol.wait")
        first = {op: body.find(op) for op in ("st.global", "atom.", "ld.global")}
        return {"launch_dependents": body.find("griddepcontrol.launch_dependents"),
                "wait": wait, "loads_before_wait": body[:max(wait, 0)].count("ld.global"),
                **first}

    out = {}
    fn = gemv._gemv_kernel
    for kind, ahead, split in (("w12", 0, 1), ("bf16", 1, 1), ("w12", 1, 4), ("bf16", 2, 1),
                               ("w12", 2, 1)):
        w12 = kind == "w12"
        sig = w12_kernel_signature(fn, w12)
        for on in (1, 2, 3, 0):
            consts = dict(W12=w12, HB_PER_ROW=False, USE_SPLIT=split > 1, EVEN_K=True, PTX=True,
                          ACC=gemv.ACC_ELEMENTWISE, BM=1, BMP=1, BN=16, BK=128, IR=16, NRB=1,
                          ESC_CH=gemv.ESC_CHUNK, ESC_PRE=16 if w12 else 0, ESC_LATE=False,
                          STAGES=1, AHEAD=ahead, PDL=on)
            sig.update({k: "constexpr" for k in consts})
            k = triton.compile(ASTSource(fn=fn, signature=dict(sig), constexprs=consts),
                               target=target, options=dict(num_warps=4, num_stages=1))
            out[f"gemv {kind} ahead={ahead} split={split} pdl={on}"] = facts(k.asm["ptx"])
    sig = {"x_ptr": "*bf16", "res_ptr": "*bf16", "gate_ptr": "*bf16", "w_ptr": "*bf16",
           "pre_w_ptr": "*bf16", "out_ptr": "*bf16", "h_ptr": "*bf16", "stride_xo": "i32",
           "stride_xi": "i32", "stride_ro": "i32", "stride_ri": "i32", "stride_go": "i32",
           "stride_gi": "i32", "inner": "i32", "D": "i32", "inv_d": "fp32", "eps": "fp32",
           "pre_eps": "fp32"}
    for mode in (1, 2):
        consts = dict(STYLE=0, HAS_RES=True, MID=triton.language.bfloat16, PRE=-1, BLOCK=2048,
                      PDL=mode)
        sig.update({k: "constexpr" for k in consts})
        k = triton.compile(ASTSource(fn=norm._rms_norm_kernel, signature=sig, constexprs=consts),
                           target=target, options=dict(num_warps=8))
        out[f"rms_norm mode={mode}"] = facts(k.asm["ptx"])
    sig = {"gate_ptr": "*bf16", "up_ptr": "*bf16", "out_ptr": "*bf16", "stride_g": "i32",
           "stride_u": "i32", "N": "i32"}
    consts = dict(BLOCK=1024, PDL=1)
    sig.update({k: "constexpr" for k in consts})
    k = triton.compile(ASTSource(fn=norm._silu_mul_kernel, signature=sig, constexprs=consts),
                       target=target, options=dict(num_warps=4))
    out["silu_mul mode=1"] = facts(k.asm["ptx"])
    return out


def test_pdl_instructions_in_the_sm90_ptx():
    from tests.unit.sm90 import run_in_subprocess

    res = run_in_subprocess(__file__)
    assert len(res) == 5 * 4 + 3, res
    for case, f in res.items():
        if case.endswith("pdl=0"):
            assert f["wait"] == -1 and f["launch_dependents"] == -1, case
            continue
        if case.endswith(("pdl=1", "mode=1")):   # the next kernel may launch before the wait
            assert 0 <= f["launch_dependents"] < f["wait"], (case, f)
        else:   # GEMV 2 (after the main loop), 3 (after the wait); start() mode 2
            assert 0 <= f["wait"] < f["launch_dependents"] < f["st.global"], (case, f)
        for op in ("st.global", "atom."):   # every write after the wait
            assert f[op] == -1 or f[op] > f["wait"], (case, op, f)
        if not case.startswith("gemv"):   # the others wait first thing
            assert f["ld.global"] > f["wait"], (case, f)
    # the GEMV's trigger after the main loop comes after its x loads, the one after the wait
    # before them
    assert (res["gemv w12 ahead=0 split=1 pdl=3"]["launch_dependents"]
            < res["gemv w12 ahead=0 split=1 pdl=2"]["launch_dependents"])
    # the GEMV's first weight tiles (ahead 1 and 2) and escape entries load before the wait
    for case in ("gemv bf16 ahead=1 split=1 pdl=1", "gemv w12 ahead=1 split=4 pdl=1",
                 "gemv w12 ahead=0 split=1 pdl=2", "gemv bf16 ahead=2 split=1 pdl=2",
                 "gemv w12 ahead=2 split=1 pdl=2"):
        f = res[case]
        assert 0 <= f["ld.global"] < f["wait"], (case, f)
    # bf16 has no escape prologue: nothing before the wait without a look-ahead
    assert res["gemv bf16 ahead=2 split=1 pdl=2"]["loads_before_wait"] > 0
    assert res["gemv w12 ahead=2 split=1 pdl=2"]["loads_before_wait"] > res[
        "gemv w12 ahead=0 split=1 pdl=2"]["loads_before_wait"]


# --------------------------------------------------------------------------------------------
# GPU only
# --------------------------------------------------------------------------------------------

def _chain(layers, x0, norm_w):
    """norm -> GEMV layers, each reading the previous one's output (W12 and bf16 alternating)."""
    from specpilot.kernels import norm
    from specpilot.w12 import gemv

    h = x0
    outs = []
    for i, w in enumerate(layers):
        a = norm.rms_norm(h, norm_w, 1e-6)
        h = gemv.w12_gemv(a, w) if i % 2 == 0 else gemv.bf16_gemv(a, w)
        h = norm.silu_mul(h, h)
        outs.append(h)
    return outs


@pytest.mark.gpu
def test_gpu_graph_with_pdl_equals_without(monkeypatch):
    from dataclasses import replace

    from specpilot.w12 import encode, gemv
    from specpilot.w12 import kernel as K

    if not pdl.supported(torch.device("cuda")):
        pytest.skip("PDL needs compute capability >= 9")
    torch.manual_seed(0)
    D = 2048
    layers = []
    for i in range(12):
        w = (torch.randn(D, D) * 0.02).bfloat16()
        layers.append(K.prepare(encode(w), "cuda") if i % 2 == 0 else w.cuda())
    x0 = torch.randn(1, D, device="cuda").bfloat16()
    nw = torch.randn(D, device="cuda").bfloat16()
    # fixed configs (no tuning); the W12 layers split K (the lock-ordered reduction under PDL);
    # ahead 2: the first K-step's weights loaded before the wait (the plain loop's sums, bit for
    # bit)
    results = {}
    for ahead in (0, 2):
        cfg = {True: replace(gemv.gemv_default_config(1, D, D), split_k=4, ahead=ahead),
               False: replace(gemv.gemv_default_config(1, D, D), ahead=ahead)}
        monkeypatch.setattr(gemv, "_tuned_config", lambda x, w, N, K_, w12, cfg=cfg: cfg[w12])
        # (start() mode, GEMV trigger): off, and every mode of each
        for on in ((0, 0), (1, 1), (1, 2), (2, 3), (2, 2)):
            monkeypatch.setattr(pdl, "ENABLED", on[0] > 0)
            monkeypatch.setattr(pdl, "MODE", on[0] or 1)
            monkeypatch.setattr(pdl, "GEMV_TRIGGER", {"w12": on[1] or 2, "bf16": on[1] or 2})
            eager = _chain(layers, x0, nw)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                outs = _chain(layers, x0, nw)
            for _ in range(3):
                g.replay()
            torch.cuda.synchronize()
            assert all(torch.equal(a, b) for a, b in zip(eager, outs)), (ahead, on)
            results[ahead, on] = [o.clone() for o in outs]
    base = results[0, (0, 0)]
    for key in list(results)[1:]:
        assert all(torch.equal(a, b) for a, b in zip(base, results[key])), key

if __name__ == "__main__":
    print(json.dumps(_compile_cases()))
