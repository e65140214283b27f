"""A bounds check for Triton kernels run in the interpreter (CPU tests), in the spirit of
compute-sanitizer's memcheck: every address a kernel loads, stores or updates atomically
(masked-off lanes excepted) must lie inside the storage of one of the kernel's tensor
arguments. On a GPU such an access reads another allocation's data or faults with "an illegal
memory access" somewhere later; in the interpreter it reads or writes the host's memory
silently. A violation raises ``OutOfBounds`` naming the kernel, the program, the operation and
the nearest argument.

    with memcheck():                # or tests/conftest.py's SPECPILOT_TRITON_MEMCHECK=1
        run_kernels_on_cpu_tensors()

Ranges are whole storages (a view's kernel may legally read past the view into its storage, as
the KV cache's page views do), so this finds accesses outside every argument, not outside a
view. Interpreter only (TRITON_INTERPRET=1, set before triton is imported).
"""

from __future__ import annotations

import contextlib

import numpy as np


class OutOfBounds(RuntimeError):
    pass


_RANGES: list = []   # a stack: (kernel name, labels [n], starts [n] uint64 sorted, ends [n])


def _storages(args: dict) -> tuple:
    """(labels, starts, ends): every tensor argument's storage [start, end), sorted by start,
    with the argument's name."""
    import torch

    spans = {}

    def add(name, a):
        if isinstance(a, (tuple, list)):
            for i, b in enumerate(a):
                add(f"{name}[{i}]", b)
        elif isinstance(a, torch.Tensor):
            s = a.untyped_storage()
            start = s.data_ptr()
            spans.setdefault(start, (name, start, start + s.nbytes()))

    for name, a in args.items():
        add(name, a)
    rows = sorted(spans.values(), key=lambda r: r[1])
    return ([r[0] for r in rows], np.array([r[1] for r in rows], dtype=np.uint64),
            np.array([r[2] for r in rows], dtype=np.uint64))


def _check(itp, op: str, ptrs, mask) -> None:
    """Raise OutOfBounds if an unmasked lane of ptrs lies outside the running kernel's
    arguments (itp: triton.runtime.interpreter)."""
    if not _RANGES:
        return
    kernel, labels, starts, ends = _RANGES[-1]
    addr = np.asarray(ptrs.data).astype(np.uint64, copy=False)
    if mask is not None:
        m = np.broadcast_to(np.asarray(mask.data, dtype=bool), addr.shape)
        addr = addr[m]
    else:
        addr = addr.reshape(-1)
    if addr.size == 0:
        return
    size = np.uint64(np.dtype(itp._get_np_dtype(ptrs.get_element_ty())).itemsize)
    i = np.searchsorted(starts, addr, side="right").astype(np.int64) - 1
    ok = i >= 0
    ok[ok] &= addr[ok] + size <= ends[i[ok]]
    if ok.all():
        return
    bad = int(addr[~ok][0])
    j = int(np.argmin(np.minimum(np.abs(starts.astype(np.int64) - bad),
                                 np.abs(ends.astype(np.int64) - bad)))) if len(starts) else -1
    near = ("no tensor arguments" if j < 0 else
            f"nearest argument {labels[j]} [{int(starts[j]):#x}, {int(ends[j]):#x}), "
            f"offset {bad - int(starts[j])} bytes")
    raise OutOfBounds(f"{kernel}: {op} of {int((~ok).sum())} lanes outside every tensor argument "
                      f"(program {tuple(itp.interpreter_builder.grid_idx)}), first at {bad:#x}: "
                      f"{near}")


@contextlib.contextmanager
def memcheck():
    """Check every interpreted kernel launch inside the block (see the module docstring)."""
    import inspect

    from triton.runtime import interpreter as itp

    B = itp.InterpreterBuilder
    saved = {n: getattr(B, n) for n in ("create_masked_load", "create_masked_store",
                                        "create_atomic_rmw", "create_atomic_cas")}
    saved_call = itp.GridExecutor.__call__

    # (plain, atomic and tensor-descriptor loads and stores all come through the masked ones)
    def masked_load(self, ptrs, mask, other, *a, **kw):
        _check(itp, "load", ptrs, mask)
        return saved["create_masked_load"](self, ptrs, mask, other, *a, **kw)

    def masked_store(self, ptrs, value, mask, *a, **kw):
        _check(itp, "store", ptrs, mask)
        return saved["create_masked_store"](self, ptrs, value, mask, *a, **kw)

    def atomic_rmw(self, op, ptr, val, mask, *a, **kw):
        _check(itp, "atomic", ptr, mask)
        return saved["create_atomic_rmw"](self, op, ptr, val, mask, *a, **kw)

    def atomic_cas(self, ptr, cmp, val, *a, **kw):
        _check(itp, "atomic cas", ptr, None)
        return saved["create_atomic_cas"](self, ptr, cmp, val, *a, **kw)

    def call(self, *args, **kwargs):
        # the kernel's own parameters by name (launch options such as num_warps are not)
        params = inspect.signature(self.fn).parameters
        named = dict(zip(params, args)) | {k: v for k, v in kwargs.items() if k in params}
        _RANGES.append((getattr(self.fn, "__name__", "kernel"), *_storages(named)))
        try:
            return saved_call(self, *args, **kwargs)
        finally:
            _RANGES.pop()

    B.create_masked_load, B.create_masked_store = masked_load, masked_store
    B.create_atomic_rmw, B.create_atomic_cas = atomic_rmw, atomic_cas
    itp.GridExecutor.__call__ = call
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(B, n, f)
        itp.GridExecutor.__call__ = saved_call
