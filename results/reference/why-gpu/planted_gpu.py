"""Issue 49, item 4 on the GPU: plants exactly N MiB in each of PyTorch's
mechanisms between memrel's baseline and the release, and keeps them:

- PyTorch cache: a 4 N MiB CUDA tensor freed without empty_cache()
  (reserved, no tensor uses it);
- PyTorch tensors: an N MiB CUDA tensor the program keeps (live);
- pinned host cache: a 2 N MiB pinned host tensor (pin_memory=True) freed to
  PyTorch's host allocator, which caches it;
- the CUDA context is made before the baseline, so it is no part of what a
  cycle retains.

The first cycle's load plants; later cycles plant nothing. The strategy's
release (`memrel.release()`: empty-cache's torch.cuda.empty_cache(),
host-empty-cache's torch._C._host_emptyCache()) then frees what its knob
frees. Usage: python3 planted_gpu.py N_MIB (under memrel exec).
"""
import sys

import torch

import memrel

MIB = 1 << 20
n_mib = int(sys.argv[1])
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
memrel.baseline()
kept = []
for cycle in range(memrel.cycles()):
    with memrel.phase("load", model="planted"):
        if cycle == 0:
            kept.append(torch.ones(n_mib * MIB, dtype=torch.uint8, device="cuda"))
            cached = torch.ones(4 * n_mib * MIB, dtype=torch.uint8, device="cuda")
            del cached
            pinned = torch.ones(2 * n_mib * MIB, dtype=torch.uint8).pin_memory()
            del pinned
    with memrel.phase("unload", model="planted"):
        pass
    memrel.release()
print(
    "allocated", torch.cuda.memory_allocated(), "reserved", torch.cuda.memory_reserved(),
    "host", torch.cuda.host_memory_stats().get("allocated_bytes.current"),
    torch.cuda.host_memory_stats().get("active_bytes.current"),
    file=sys.stderr,
)
