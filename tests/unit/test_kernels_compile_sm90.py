"""Kernels that have run only in Triton's interpreter so far, compiled for an H100/H200 (sm_90)
on any machine: Triton's compiler and the ptxas bundled with its wheel need no GPU. A kernel the
interpreter accepts but the compiler rejects (an unsupported op, a layout the backend cannot
lower) fails here, in CI, instead of on the next GPU run; so does one that spills registers
(ptxas's report). The compiles run in a subprocess without TRITON_INTERPRET, which
tests/conftest.py sets for this process on CPU machines."""

from __future__ import annotations

import json

from tests.unit.sm90 import run_in_subprocess, spills

CONV_SIG = {"x_ptr": "*bf16", "w_ptr": "*bf16", "state_ptr": "*fp32", "y_ptr": "*bf16",
            "rows_ptr": "*i32", "fresh_ptr": "*i32", "sx_ptr": "*bf16", "skv_ptr": "*bf16",
            "stride_x": "i32", "stride_w": "i32", "stride_sr": "i32", "stride_sx": "i32",
            "stride_skv": "i32", "T": "i32", "C": "i32", "KD": "i32", "K": "constexpr",
            "KP": "constexpr", "BLOCK_C": "constexpr", "TC": "constexpr",
            "WRITE_STATE": "constexpr", "STASH": "constexpr"}
COMMIT_SIG = {"conv_ptr": "*fp32", "sx_ptr": "*bf16", "rows_ptr": "*i32", "fresh_ptr": "*i32",
              "keep_ptr": "*i32", "stride_cl": "i32", "stride_cr": "i32", "stride_sl": "i32",
              "stride_sx": "i32", "T": "i32", "C": "i32", "K": "constexpr", "KP": "constexpr",
              "BLOCK_C": "constexpr"}
WALK_SIG = {"proj_ptr": "*fp32", "succ_ptr": "*fp32", "unary_ptr": "*fp32", "cand_ptr": "*i64",
            "prev_ptr": "*i64", "book_ptr": "*bf16", "out_ptr": "*i64", "P": "i32", "K": "i32",
            "RANK": "i32", "BK": "constexpr", "BR": "constexpr"}
TOPK_SIG = {"x_ptr": "*bf16", "val_ptr": "*fp32", "idx_ptr": "*i32", "V": "i32",
            "stride_x": "i32", "multiplier": "fp32", "cap": "fp32", "K": "constexpr",
            "KP": "constexpr", "CH": "constexpr", "SOFTCAP": "constexpr"}
MERGE_SIG = {"val_ptr": "*fp32", "idx_ptr": "*i32", "out_v_ptr": "*fp32", "out_i_ptr": "*i64",
             "N": "i32", "K": "constexpr", "KP": "constexpr", "NP": "constexpr"}
ROPE_SIG = {"pos_ptr": "*i64", "cos_ptr": "*fp32", "sin_ptr": "*fp32", "q_ptr": "*bf16",
            "k_ptr": "*bf16", "qo_ptr": "*bf16", "ko_ptr": "*bf16", "qw_ptr": "*bf16",
            "kw_ptr": "*bf16", "stride_qt": "i32", "stride_qh": "i32", "stride_kt": "i32",
            "stride_kh": "i32", "stride_tab": "i32", "Hq": "i32", "Hkv": "i32", "D": "i32",
            "R": "i32", "q_blocks": "i32", "q_scale": "fp32", "q_eps": "fp32", "k_eps": "fp32",
            "inv_d": "fp32", "Q_NORM": "constexpr", "K_NORM": "constexpr",
            "Q_SCALED": "constexpr", "BLOCK_H": "constexpr", "BLOCK_D": "constexpr"}
ROWS = (1, 8, 16, 40)  # decode, verify 8 / 16, a uniform prefill


def _compile_all() -> dict:
    """Runs in the subprocess: {case: spill bytes or None}."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from specpilot.kernels import conv, rope, selector, topk

    target, out = GPUTarget("cuda", 90, 32), {}

    def build(fn, sig, consts, name, pdl=0):
        if "PDL" in fn.arg_names:   # kernels/pdl.py: off unless asked for
            sig, consts = {**sig, "PDL": "constexpr"}, {**consts, "PDL": pdl}
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts), target=target)
        out[name] = spills(k.asm["ptx"])
        assert ("griddepcontrol.wait" in k.asm["ptx"]) == (pdl > 0), name

    for t in ROWS:
        tc, block_c = conv._tile(t)
        for write_state, stash in ((True, False), (False, True)):
            build(conv._causal_conv_kernel, CONV_SIG, dict(
                K=4, KP=4, BLOCK_C=block_c, TC=tc, WRITE_STATE=write_state, STASH=stash),
                f"conv T={t} write_state={write_state} stash={stash}")
    build(conv._commit_windows_kernel, COMMIT_SIG, dict(K=4, KP=4, BLOCK_C=conv._BLOCK_C),
          "commit_windows")
    # DFlash2's greedy walk at the shipped drafters' top-k 16 and rank 256
    build(selector._greedy_walk_kernel, WALK_SIG, dict(BK=16, BR=256), "selector greedy walk")
    # the DFlash2 head's top-k 16 (kernels/topk.py; a plain Python global in a kernel passed the
    # interpreter and failed the GPU compile once)
    for softcap in (False, True):
        build(topk._chunk_topk_kernel, TOPK_SIG, dict(K=16, KP=16, CH=topk.CHUNK,
                                                      SOFTCAP=softcap), f"topk chunk {softcap}")
    build(topk._merge_topk_kernel, MERGE_SIG, dict(K=16, KP=16, NP=1024), "topk merge")
    # RoPE with the q / k head norms in the launch: plain (Qwen3 and the drafters), zero-centred
    # (Qwen3.5), weightless with the q scale (Muse-Glimmer); head dim 128, 16 heads per program
    for qn, kn, scaled in ((0, 0, False), (1, 1, False), (4, 4, True)):
        build(rope._rope_kernel, ROPE_SIG, dict(Q_NORM=qn, K_NORM=kn, Q_SCALED=scaled,
                                                BLOCK_H=16, BLOCK_D=128), f"rope norm {qn}")
    # with programmatic dependent launch (kernels/pdl.py)
    build(rope._rope_kernel, ROPE_SIG, dict(Q_NORM=1, K_NORM=1, Q_SCALED=False, BLOCK_H=16,
                                            BLOCK_D=128), "rope pdl", pdl=1)
    build(conv._commit_windows_kernel, COMMIT_SIG, dict(K=4, KP=4, BLOCK_C=conv._BLOCK_C),
          "commit_windows pdl", pdl=2)
    return out


def test_new_kernels_compile_for_sm90_without_spills():
    result = run_in_subprocess(__file__)
    assert len(result) == 2 * len(ROWS) + 10
    spilled = {k: v for k, v in result.items() if v not in (None, 0)}
    assert not spilled, f"register spills (bytes): {spilled}"


if __name__ == "__main__":
    print(json.dumps(_compile_all()))
