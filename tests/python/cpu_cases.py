"""Host-memory cases for the memrel pytest plugin, run as a user would (not
collected by itself: no test_ prefix); results/reference/pytest/cpu.sh runs
them and commits what memrel wrote:

    pytest --memrel --memrel-dir DIR tests/python/cpu_cases.py

Expected: test_keeps_300_mib and test_small_blocks_without_release fail, the
other two pass. The order matters and is the file's: each test's baseline is
what the tests before it left.
"""

import pytest

KEPT = []


def small_blocks():
    """300 MiB in 16 KiB blocks (below glibc's mmap threshold: from the heap),
    a block kept above them, then all but that block freed: free() gives back
    only the top of the heap, so the 300 MiB stay with glibc."""
    blocks = [b"\x01" * 16384 for _ in range(300 * 64)]
    KEPT.append(b"\x02" * 16384)
    del blocks


@pytest.mark.memrel(max_retained_mib=100)
def test_keeps_300_mib():
    KEPT.append(b"\x01" * (300 << 20))


@pytest.mark.memrel(max_retained_mib=100)
def test_frees_300_mib():
    data = b"\x01" * (300 << 20)
    del data


@pytest.mark.memrel(max_retained_mib=100, release="malloc-trim")
def test_small_blocks_with_malloc_trim():
    small_blocks()


@pytest.mark.memrel(max_retained_mib=100)
def test_small_blocks_without_release():
    small_blocks()
