"""tests/triton_memcheck.py, the interpreter's bounds check that tests/conftest.py puts around
every CPU test: an access outside every tensor argument raises, a masked-off one does not, and
the check is off outside the block."""

import pytest
import torch

from tests.triton_memcheck import OutOfBounds, memcheck

triton = pytest.importorskip("triton")
tl = triton.language


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr, MASK_LOAD: tl.constexpr, ATOMIC: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASK_LOAD:
        v = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    else:
        v = tl.load(x_ptr + offs)
    if ATOMIC:
        tl.atomic_add(y_ptr + offs, v)
    else:
        tl.store(y_ptr + offs, v, mask=offs < n)


@pytest.mark.interpreter
def test_memcheck_names_the_access_outside_the_arguments():
    x = torch.randn(100)
    y = torch.zeros(100)
    with memcheck():
        _copy[(4,)](x, y, 100, BLOCK=32, MASK_LOAD=True, ATOMIC=False)   # masked: fine
        assert torch.equal(x, y)
        # past the view x[:20] but inside its storage: allowed (KV pages are such views)
        _copy[(1,)](x[:20], y, 20, BLOCK=32, MASK_LOAD=False, ATOMIC=False)
        with pytest.raises(Exception, match=r"_copy: load of 28 lanes outside every tensor "
                                            r"argument \(program \(3, 0, 0\)\).*x_ptr.*offset "
                                            r"400 bytes"):
            _copy[(4,)](x, y, 100, BLOCK=32, MASK_LOAD=False, ATOMIC=False)
        # named by parameter also with launch options among the keywords
        with pytest.raises(Exception, match=r"_copy: atomic of 28 lanes.*y_ptr"):
            _copy[(4,)](x, y, 100, BLOCK=32, MASK_LOAD=True, ATOMIC=True, num_warps=2)
    assert issubclass(OutOfBounds, RuntimeError)
