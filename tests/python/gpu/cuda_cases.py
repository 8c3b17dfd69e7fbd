"""PyTorch tests for the memrel pytest plugin on a GPU (not collected by
itself: no test_ prefix). test_cuda_retained.py runs each case in its own
pytest process with pytester; results/reference/pytest/gpu.sh also runs the
file as a user would:

    MEMREL_BIN=/path/to/memrel pytest --memrel tests/python/gpu/cuda_cases.py

Every case works on 256 MiB of float32 on cuda:0, with VRAM limits of 64 MiB.
The module fixture creates the CUDA context and PyTorch's allocator before
any baseline, so the context's VRAM is not counted as retained.
"""

import pytest
import torch

MIB = 1 << 20
ELEMENTS = 256 * MIB // 4  # 256 MiB of float32

KEPT = []


@pytest.fixture(scope="module", autouse=True)
def cuda_context():
    torch.ones(1, device="cuda")
    torch.cuda.synchronize()


@pytest.mark.memrel(max_vram_retained_mib=64)
def test_keeps_a_cuda_tensor():
    # A module-level list outlives the test: 256 MiB of VRAM stay allocated.
    KEPT.append(torch.ones(ELEMENTS, device="cuda"))
    torch.cuda.synchronize()


@pytest.mark.memrel(max_vram_retained_mib=64, release="empty-cache")
def test_frees_a_cuda_tensor_with_empty_cache():
    t = torch.ones(ELEMENTS, device="cuda")
    torch.cuda.synchronize()
    del t


@pytest.mark.memrel(max_vram_retained_mib=64)
def test_frees_a_cuda_tensor_without_empty_cache():
    # Freed to PyTorch's caching allocator, which keeps the segment reserved:
    # the driver (NVML) still counts it against the process.
    t = torch.ones(ELEMENTS, device="cuda")
    torch.cuda.synchronize()
    del t
