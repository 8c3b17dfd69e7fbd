"""The pytest plugin on a GPU: a PyTorch test that keeps a CUDA tensor fails
on max_vram_retained_mib; a freed tensor fails too unless the release step
empties PyTorch's cache. Each case of cuda_cases.py runs in its own pytest
process (pytester), measured by the memrel binary with --device cuda.

Needs torch with a CUDA device and the plugin and binary (the installed wheel,
or PYTHONPATH=python PYTEST_PLUGINS=memrel.pytest_plugin MEMREL_BIN=...):
results/reference/pytest/gpu.sh runs it on the GPU machine. Skipped elsewhere.
"""

import json
import os
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="the GPU tests need PyTorch")
if not torch.cuda.is_available():
    pytest.skip("the GPU tests need a CUDA device", allow_module_level=True)

pytest_plugins = ["pytester"]

MIB = 1 << 20
CASES = (pathlib.Path(__file__).parent / "cuda_cases.py").read_text()


def run_case(pytester, name):
    pytester.makepyfile(test_cases=CASES)
    out = pytester.path / "memrel-out"
    result = pytester.runpytest_subprocess("--memrel", "--memrel-dir", str(out), "-k", name, timeout=300)
    (test_dir,) = [p for p in out.iterdir() if p.is_dir()]
    with open(os.path.join(test_dir, "summary.json")) as f:
        resources = {r["resource"]: r for r in json.load(f)["runs"][0]["resources"]}
    return result, resources


def test_a_kept_cuda_tensor_fails_on_max_vram_retained_mib(pytester):
    result, res = run_case(pytester, "test_keeps_a_cuda_tensor")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*memrel: memory did not go back after the test: cuda:0 retained 2??.? MiB > 64 MiB*",
            "*resource*baseline MiB*peak MiB*after MiB*retained MiB*limit MiB*",
            "*cuda:0*64*OVER*",
            "*timeline: *timeline.png*",
        ]
    )
    retained = res["cuda:0"]["cycles"][-1]["retained_bytes"]
    assert 250 * MIB <= retained <= 300 * MIB, res["cuda:0"]


def test_a_freed_cuda_tensor_still_cached_by_pytorch_fails(pytester):
    result, res = run_case(pytester, "test_frees_a_cuda_tensor_without_empty_cache")
    result.assert_outcomes(failed=1)
    assert res["cuda:0"]["cycles"][-1]["retained_bytes"] >= 250 * MIB, res["cuda:0"]


def test_a_freed_cuda_tensor_passes_with_the_empty_cache_release(pytester):
    result, res = run_case(pytester, "test_frees_a_cuda_tensor_with_empty_cache")
    result.assert_outcomes(passed=1)
    cuda = res["cuda:0"]
    assert cuda["peak_bytes"] >= cuda["baseline_bytes"] + 250 * MIB, cuda
    assert cuda["cycles"][-1]["retained_bytes"] < 16 * MIB, cuda
