"""The pytest plugin (python/memrel/pytest_plugin.py), tested as a user runs it.

Each test writes a test file with pytester and runs pytest on it in a child
process (`runpytest_subprocess`): the plugin attaches the real memrel binary
to that child, so the memory measured is the child's, read from /proc by
memrel. Needs the plugin and the binary: the installed wheel
(`pip install memrel`; .ci/run), or PYTHONPATH=python,
PYTEST_PLUGINS=memrel.pytest_plugin and MEMREL_BIN=target/release/memrel
(tests/it/pytest_plugin.rs).

Run: python -m pytest tests/python/test_pytest_plugin.py
"""

import ctypes
import ctypes.util
import json
import os
import stat

import pytest

pytest_plugins = ["pytester"]

MIB = 1024 * 1024

KEEP_300 = """
import pytest

KEPT = []


@pytest.mark.memrel(max_retained_mib=100)
def test_keeps_300_mib():
    KEPT.append(b"\\x01" * (300 << 20))
"""

# Held 0.2 s (20 samples) before the del, so the peak is sampled on a busy
# machine too.
FREE_300 = """
import time

import pytest


@pytest.mark.memrel(max_retained_mib=100)
def test_frees_300_mib():
    data = b"\\x01" * (300 << 20)
    time.sleep(0.2)
    del data
"""

# 300 MiB in 16 KiB blocks (below glibc's mmap threshold: they come from the
# heap), then a block kept above them: free() can only give back the top of
# the heap, so the freed 300 MiB stay with glibc until malloc_trim(0).
SMALL_BLOCKS = """
import pytest

KEPT = []


@pytest.mark.memrel(max_retained_mib=100, release=%r)
def test_small_blocks_freed():
    blocks = [b"\\x01" * 16384 for _ in range(300 * 64)]
    KEPT.append(b"\\x02" * 16384)
    del blocks
"""

# A cache filled on the first call: the first call keeps 200 MiB, later
# calls keep nothing more.
CACHE = """
import pytest

CACHE = {}


@pytest.mark.memrel(max_retained_mib=100, warmups=%d)
def test_cache():
    if "table" not in CACHE:
        CACHE["table"] = b"\\x01" * (200 << 20)
"""


def run(pytester, *args):
    return pytester.runpytest_subprocess(*args, timeout=300)


def only_dir(root):
    """The one test directory the plugin wrote under --memrel-dir."""
    dirs = [d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))]
    assert len(dirs) == 1, dirs
    return os.path.join(root, dirs[0])


def host(test_dir):
    """summary.json's host resource of the one run, and its one cycle."""
    with open(os.path.join(test_dir, "summary.json")) as f:
        summary = json.load(f)
    (res,) = [r for r in summary["runs"][0]["resources"] if r["resource"] == "host"]
    return res, res["cycles"][-1]


def test_a_test_keeping_300_mib_fails_with_the_numbers_and_the_timeline(pytester):
    pytester.makepyfile(test_keep=KEEP_300)
    out = pytester.path / "memrel-out"
    result = run(pytester, "--memrel", "--memrel-dir", str(out))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*memrel: memory did not go back after the test: host retained 3??.? MiB > 100 MiB*",
            "*resource*baseline MiB*peak MiB*after MiB*retained MiB*limit MiB*",
            "*host*100*OVER*",
            "*timeline: %s*timeline.png*" % out,
        ]
    )
    test_dir = only_dir(str(out))
    assert os.path.getsize(os.path.join(test_dir, "timeline.png")) > 0
    res, cycle = host(test_dir)
    # b"\x01" * 300 MiB is touched page by page: RSS grows by it and stays.
    assert 290 * MIB <= cycle["retained_bytes"] <= 320 * MIB, cycle
    assert res["peak_bytes"] >= res["baseline_bytes"] + 290 * MIB, res


def test_a_test_freeing_300_mib_passes_and_its_peak_was_seen(pytester):
    pytester.makepyfile(test_free=FREE_300)
    out = pytester.path / "memrel-out"
    result = run(pytester, "--memrel", "--memrel-dir", str(out))
    result.assert_outcomes(passed=1)
    res, cycle = host(only_dir(str(out)))
    assert res["peak_bytes"] >= res["baseline_bytes"] + 290 * MIB, res
    assert cycle["retained_bytes"] < 16 * MIB, cycle
    # The report at the end of the run: one row per test and resource.
    result.stdout.fnmatch_lines(
        ["*= memrel report =*", "test*resource*retained MiB*", "test_free.py::test_frees_300_mib*host*ok"]
    )


@pytest.mark.skipif(
    ctypes.util.find_library("c") is None or os.confstr("CS_GNU_LIBC_VERSION") is None,
    reason="glibc only: malloc_trim and the heap that keeps freed small blocks are glibc's",
)
def test_small_blocks_freed_pass_only_with_the_malloc_trim_release(pytester):
    pytester.makepyfile(test_small=SMALL_BLOCKS % (None,))
    out = pytester.path / "without"
    result = run(pytester, "--memrel", "--memrel-dir", str(out))
    result.assert_outcomes(failed=1)
    _, kept = host(only_dir(str(out)))
    assert kept["retained_bytes"] >= 250 * MIB, kept

    pytester.makepyfile(test_small=SMALL_BLOCKS % ("malloc-trim",))
    out = pytester.path / "with"
    result = run(pytester, "--memrel", "--memrel-dir", str(out))
    result.assert_outcomes(passed=1)
    _, trimmed = host(only_dir(str(out)))
    assert trimmed["retained_bytes"] < 16 * MIB, trimmed


def test_warmups_call_the_test_first_so_a_filled_cache_is_in_the_baseline(pytester):
    pytester.makepyfile(test_cache=CACHE % 0)
    run(pytester, "--memrel").assert_outcomes(failed=1)
    pytester.makepyfile(test_cache=CACHE % 1)
    run(pytester, "--memrel").assert_outcomes(passed=1)


def test_without_the_flag_nothing_is_measured(pytester):
    pytester.makepyfile(test_keep=KEEP_300)
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert "memrel report" not in result.stdout.str()


def test_results_go_to_a_temporary_directory_kept_only_when_a_test_failed(pytester):
    pytester.makepyfile(test_free=FREE_300)
    passed = run(pytester, "--memrel")
    passed.assert_outcomes(passed=1)
    assert "results (timeline.png" not in passed.stdout.str()

    pytester.makepyfile(test_free=KEEP_300)
    failed = run(pytester, "--memrel")
    failed.assert_outcomes(failed=1)
    (line,) = [x for x in failed.stdout.lines if x.startswith("results (timeline.png")]
    kept = line.split(": ", 1)[1]
    assert os.path.isfile(os.path.join(only_dir(kept), "summary.json"))


@pytest.mark.parametrize(
    "marker, says",
    [
        ("max_retaind_mib=1", "unknown keyword max_retaind_mib; the keywords are max_retained_mib,"),
        ("max_retained_mib=-1", "max_retained_mib=-1: must not be negative"),
        ("max_vram_retained_mib=-0.5", "max_vram_retained_mib=-0.5: must not be negative"),
        ("release='malloc-trimm'", "unknown release action 'malloc-trimm'; the actions are gc, malloc-trim,"),
        ("warmups=-1", "warmups=-1: must be a whole number, 0 or more"),
        ("100", "takes keywords only"),
    ],
)
def test_a_bad_marker_is_a_usage_error_naming_it(pytester, marker, says):
    pytester.makepyfile(
        test_bad="""
import pytest


@pytest.mark.memrel(%s)
def test_marked():
    pass
"""
        % marker
    )
    # With and without --memrel: a typo is found before anything runs.
    for args in (["--memrel"], []):
        result = run(pytester, *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, (args, result.stderr.str())
        result.stderr.fnmatch_lines(["ERROR: @pytest.mark.memrel on test_bad.py::test_marked: *"])
        assert says in result.stderr.str()


def test_a_missing_binary_is_an_error_of_the_test_not_a_pass(pytester, monkeypatch):
    monkeypatch.setenv("MEMREL_BIN", str(pytester.path / "no-such-memrel"))
    pytester.makepyfile(test_free=FREE_300)
    result = run(pytester, "--memrel")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_frees_300_mib*",
            "memrel: MEMREL_BIN=*no-such-memrel is not an executable file; point it at the memrel binary",
        ]
    )


def test_a_process_memrel_cannot_attach_to_is_an_error_with_memrels_reason(pytester, monkeypatch):
    # A stand-in binary refusing as memrel does (exit 2, its reason on
    # stderr): the plugin passes the reason on and the test errors.
    fake = pytester.path / "memrel-refuses"
    fake.write_text(
        "#!/bin/sh\n"
        'echo "memrel: error: cannot read /proc/$$/smaps_rollup: permission denied" >&2\n'
        "exit 2\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("MEMREL_BIN", str(fake))
    pytester.makepyfile(test_free=FREE_300)
    result = run(pytester, "--memrel")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "memrel: memrel attach could not measure this process (pid *), exit 2: "
            "memrel: error: cannot read /proc/*/smaps_rollup: permission denied",
        ]
    )


def has_nvml():
    """Whether libnvidia-ml.so.1 loads here, as memrel opens it."""
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(has_nvml(), reason="this machine has NVML: memrel samples VRAM here instead of refusing")
def test_a_vram_limit_without_nvml_is_an_error_with_memrels_reason(pytester):
    pytester.makepyfile(
        test_vram="""
import pytest


@pytest.mark.memrel(max_vram_retained_mib=10)
def test_vram():
    pass
"""
    )
    result = run(pytester, "--memrel")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["memrel: memrel attach could not measure this process (pid *), exit 2: *cannot sample VRAM*"]
    )


def test_a_test_failing_on_its_own_keeps_its_failure_and_is_still_reported(pytester):
    pytester.makepyfile(
        test_own="""
import pytest


@pytest.mark.memrel(max_retained_mib=100)
def test_asserts():
    assert 1 + 1 == 3
"""
    )
    result = run(pytester, "--memrel")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*assert (1 + 1) == 3*", "*= memrel report =*", "test_own.py::test_asserts*host*ok"])
    assert "memory did not go back" not in result.stdout.str()
