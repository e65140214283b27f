"""Shared pytest setup.

- `demo_model_dir` (session): the converted SmolLM2-135M-Instruct folder (prepared once and
  cached under $SPECPILOT_CACHE, see specpilot/demo.py).
- `@pytest.mark.gpu`: the test needs CUDA; skipped automatically when torch sees no GPU.
- `@pytest.mark.interpreter`: the test runs Triton kernels on CPU tensors in the interpreter (the
  CPU twins of the graph path); skipped where torch sees a GPU, since the interpreter is off there
  and the engine refuses Triton on CPU. Their GPU counterparts are the `gpu` tests and scripts/gpu_*.
- Without CUDA, TRITON_INTERPRET=1 is set before anything imports triton: triton reads it when a
  kernel is defined (`@triton.jit`, including triton's own tl.sum / tl.max), not when it runs, and
  transformers imports triton early, so a test module cannot set it reliably for itself.
- Without CUDA, every test runs under `tests/triton_memcheck.memcheck()`: each load, store and
  atomic of an interpreted Triton kernel must stay inside its tensor arguments' storages (an
  out-of-bounds access, which on a GPU reads other data or faults later, fails the test).
  SPECPILOT_TRITON_MEMCHECK=0 turns it off.
- torch uses at most 2 threads (the CI machine has 2 cores); override with
  SPECPILOT_TORCH_THREADS.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach a model hub
if not __import__("torch").cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # CPU: Triton kernels run in the interpreter


def pytest_configure(config: pytest.Config) -> None:
    # Also declared in pyproject.toml; repeated here so the marker exists under any rootdir.
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA GPU; skipped automatically when torch.cuda.is_available() is false")
    config.addinivalue_line(
        "markers", "interpreter: Triton kernels on CPU in the interpreter; skipped where CUDA is available")
    try:
        import torch
    except ImportError:
        return
    # One intra-op thread by default: the tiny models gain nothing from more, and OpenMP threads
    # spinning against the server / scheduler threads (or another process) slowed the suite by
    # over 20x on the 2-core CI machine (measured: 14.6 s with 1 thread vs 356 s with 2).
    threads = int(os.environ.get("SPECPILOT_TORCH_THREADS", "0")) or 1
    torch.set_num_threads(threads)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    cuda = _cuda_available()
    marker, reason = (("interpreter", "runs Triton in the interpreter on CPU, which is off where CUDA "
                       "is available") if cuda else
                      ("gpu", "needs a CUDA GPU (torch.cuda.is_available() is false)"))
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if item.get_closest_marker(marker) is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _triton_memcheck():
    """Interpreted Triton kernels bounds-checked (module docstring)."""
    if os.environ.get("TRITON_INTERPRET") != "1" or os.environ.get(
            "SPECPILOT_TRITON_MEMCHECK", "1") == "0":
        yield
        return
    import importlib.util

    if importlib.util.find_spec("triton") is None:   # no triton: nothing interpreted
        yield
        return
    from tests.triton_memcheck import memcheck

    with memcheck():
        yield


@pytest.fixture(scope="session")
def demo_model_dir() -> str:
    """Path of the embedded demo model folder (config.json, model.safetensors, tokenizer)."""
    from specpilot.demo import demo_model_path

    return demo_model_path()
