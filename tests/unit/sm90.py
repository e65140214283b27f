"""Compiling Triton kernels for an H100/H200 (sm_90) on any machine, for tests: Triton's compiler
and the ptxas bundled with its wheel need no GPU. A test module defines the compiles in a
function that its `__main__` block prints as JSON; `run_in_subprocess` runs the module without
TRITON_INTERPRET (which tests/conftest.py sets on CPU machines) and returns that JSON."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import pytest


def ptxas_report(ptx: str, sass: bool = False):
    """What a bundled ptxas -v prints (stderr) when it assembles this PTX for sm_90a, or None
    without one that takes its PTX version; with ``sass``, (that, the cubin's SASS from the
    bundled cuobjdump)."""
    import triton

    bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    found = sorted(glob.glob(os.path.join(bindir, "ptxas*")))
    with tempfile.TemporaryDirectory() as d:
        src, obj = os.path.join(d, "k.ptx"), os.path.join(d, "k.o")
        with open(src, "w") as f:
            f.write(ptx)
        for ptxas in found:  # the wheel may bundle several; the PTX version picks one
            r = subprocess.run([ptxas, "-v", "--gpu-name", "sm_90a", src, "-o", obj],
                               capture_output=True, text=True)
            if r.returncode == 0:
                if not sass:
                    return r.stderr
                dump = subprocess.run([os.path.join(bindir, "cuobjdump"), "-sass", obj],
                                      capture_output=True, text=True, check=True)
                return r.stderr, dump.stdout
            if "Unsupported .version" not in r.stderr:
                raise RuntimeError(r.stderr[-2000:])
    return (None, None) if sass else None


def spills(ptx: str) -> int | None:
    """Spill-store bytes that a bundled ptxas reports for this PTX, or None without one."""
    report = ptxas_report(ptx)
    if report is None:
        return None
    line = next(x for x in report.splitlines() if "spill stores" in x)
    return int(line.split("bytes spill stores")[0].split(",")[-1])


def run_in_subprocess(module_file: str, *args: str):
    """Run `python module_file [args]` (its __main__ prints one JSON line last) without
    TRITON_INTERPRET and return the parsed JSON; skips when this Triton cannot target sm_90."""
    backends = pytest.importorskip("triton.backends.compiler")
    if not hasattr(backends, "GPUTarget"):
        pytest.skip("this triton has no GPUTarget")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, os.path.abspath(module_file), *args], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def w12_kernel_signature(fn, w12: bool) -> dict:
    """The runtime arguments' types shared by the W12 GEMV and GEMM kernels (``w12/gemv.py``
    ``_gemv_kernel``, ``w12/kernel.py`` ``_gemm_kernel``): ten pointers (planes as bytes, or a bf16
    weight) and ten 32-bit integers; constexprs are added by the caller."""
    ptr = "*u8" if w12 else "*bf16"
    sig = {"x_ptr": "*bf16", "y_ptr": "*bf16", "ws_ptr": "*fp32", "lock_ptr": "*i32",
           "w_ptr": ptr, "h_ptr": ptr, "hb_ptr": ptr, "koff_ptr": "*i32", "kent_ptr": "*i32",
           "kval_ptr": "*i16"}
    sig.update({a: "i32" for a in list(fn.arg_names)[10:20]})
    return sig


_SASS_OP = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][\w.]*)\s*([^;]*);")


def wgmma_a_hazards(sass: str) -> list:
    """Instructions of this SASS that write a register an in-flight wgmma (HGMMA with its A
    operand in registers) still reads: a wgmma reads its A registers until a
    WARPGROUP.DEPBAR lets it go, and ptxas does not keep them for it (session 39: a loop that
    waited for a round's wgmmas one round later had them overwritten by the next round's
    loads). In address order, and once more from a backward branch's target with what is still
    in flight there (the loop's next round). Returns the offending lines (empty: none)."""
    ops = [(int(m.group(1), 16), m.group(3), [o.strip() for o in m.group(4).split(",")])
           for m in map(_SASS_OP.search, sass.splitlines()) if m]

    def regs(op: str, operands: list) -> set:
        m = re.fullmatch(r"R(\d+)", operands[0]) if operands else None
        if m is None:
            return set()
        n = 4 if ".128" in op else 2 if (".64" in op or "WIDE" in op or op.startswith("CS2R")) \
            else 1
        return {int(m.group(1)) + i for i in range(n)}

    def scan(start: int, stop: int, groups: list, open_: set, bad: list) -> None:
        for addr, op, operands in ops:
            if not start <= addr <= stop:
                continue
            if op.startswith("HGMMA"):
                a = re.fullmatch(r"R(\d+)", operands[1]) if len(operands) > 1 else None
                if a:
                    open_ |= {int(a.group(1)) + i for i in range(4)}
                if "gsb0" in operands[-1]:
                    groups, open_ = groups + [open_], set()
            elif op.startswith("WARPGROUP.DEPBAR"):
                keep = int(operands[-1], 16)
                groups = groups[len(groups) - keep:] if keep else []
            elif regs(op, operands) & set().union(open_, *groups):
                bad.append(f"{addr:#06x} {op} {', '.join(operands)}")
            elif op == "BRA" and groups and int(operands[-1], 16) < addr and start == 0:
                scan(int(operands[-1], 16), addr, groups, set(open_), bad)

    bad = []
    scan(0, 1 << 62, [], set(), bad)
    return sorted(set(bad))
