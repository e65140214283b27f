"""The L2 prefetch's host side (specpilot/kernels/prefetch.py): what it would issue, and its
refusals. The kernel itself is inline PTX the interpreter cannot run; it is compiled for sm_90 in
test_kernels_compile_sm90.py and timed by scripts/gpu_l2_prefetch_probe.py on a GPU."""
import pytest
import torch

from specpilot.kernels import prefetch as P


def test_row_plan_rounds_and_caps():
    w = torch.zeros(5120, 6144, dtype=torch.uint8)          # a W12 L plane
    assert P.row_plan(w, 1000) == (5120, 6144, 992)         # down to a multiple of 16
    assert P.row_plan(w, 10 ** 6, rows=100) == (100, 6144, 6144)   # capped at the row
    assert P.row_plan(w, 512, rows=10 ** 6) == (5120, 6144, 512)
    b = torch.zeros(64, 40, dtype=torch.bfloat16)
    assert P.row_plan(b, 64) == (64, 80, 64)                # strides in bytes
    assert P.row_plan(b, 100) == (64, 80, 80)
    assert P.row_plan(b[:, :24], 100) == (64, 80, 48)       # a column slice: its own length
    assert P.row_plan(w, 8)[2] == 0                          # nothing to issue
    with pytest.raises(ValueError, match="contiguous rows"):
        P.row_plan(w.t(), 16)
    with pytest.raises(ValueError, match="2-D"):
        P.row_plan(torch.zeros(16, dtype=torch.uint8), 16)
    with pytest.raises(ValueError, match="aligned"):
        P.row_plan(torch.zeros(4, 10, dtype=torch.uint8), 16)   # 10-byte rows


def test_head_plan():
    t = torch.zeros(3 * P.HEAD_CHUNK + 100, dtype=torch.uint8)
    assert P.head_plan(t, 10 ** 9) == (3, P.HEAD_CHUNK, 96)
    assert P.head_plan(t, P.HEAD_CHUNK) == (1, P.HEAD_CHUNK, 0)
    assert P.head_plan(torch.zeros(4, 8, dtype=torch.bfloat16), 40) == (0, P.HEAD_CHUNK, 32)
    with pytest.raises(ValueError, match="contiguous"):
        P.head_plan(torch.zeros(8, 8).t(), 16)


def test_refuses_cpu_tensors():
    with pytest.raises(ValueError, match="CUDA"):
        P.prefetch_rows(torch.zeros(16, 64, dtype=torch.uint8), 16)
    with pytest.raises(ValueError, match="CUDA"):
        P.prefetch_head(torch.zeros(64, dtype=torch.uint8), 16)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_prefetch_runs_and_changes_nothing():
    w = torch.randint(0, 255, (4096, 6144), dtype=torch.uint8, device="cuda")
    before = w.clone()
    P.prefetch_rows(w, 1024)
    P.prefetch_head(w, 5 << 20)
    P.prefetch_rows(w.view(torch.bfloat16), 4096, rows=100)
    torch.cuda.synchronize()
    assert torch.equal(w, before)
