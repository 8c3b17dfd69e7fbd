"""Plants known bytes in each framework view the memrel module sends (issue 49, item 2).

Run under memrel (results/reference/views-gpu/run.sh does):
``memrel exec --cycles 2 -- python3 planted.py``. Each cycle's load leaves,
by the frameworks' own accounts:

- PyTorch, GPU 0: a 256 MiB live tensor (allocated 256 MiB) and a 1 GiB tensor
  deleted without ``empty_cache`` (reserved 1.25 GiB: reserved - allocated = 1 GiB);
- PyTorch, host: a 512 MiB pinned tensor freed to PyTorch's host cache (no
  ``_host_emptyCache``): pinned held 512 MiB; in use 0 (sent from torch 2.15
  on: 2.11 keeps a freed block in ``active_bytes``);
- JAX (if importable; ``XLA_PYTHON_CLIENT_PREALLOCATE=false``): a 256 MiB array
  deleted, which its pool keeps (in use ~0, pool >= 256 MiB).

The unload deletes the live tensor (allocated 0, reserved still 1.25 GiB);
the release is the strategy's (``drop``: nothing but gc).
"""

import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import memrel  # noqa: E402
import torch  # noqa: E402

try:
    import jax  # noqa: E402
    import jax.numpy as jnp  # noqa: E402
except Exception as e:  # noqa: BLE001
    jax = None
    sys.stderr.write("planted.py: no JAX (%s): its views are not planted\n" % e)

MIB = 1 << 20


def report(what):
    """What the frameworks say right now, on stderr (beside memrel's record)."""
    line = {
        "allocated": torch.cuda.memory_allocated(0) // MIB,
        "reserved": torch.cuda.memory_reserved(0) // MIB,
    }
    host = torch.cuda.memory.host_memory_stats_as_nested_dict()
    for key in ("allocated_bytes", "active_bytes"):
        if key in host:
            line["pinned_" + key] = host[key]["current"] // MIB
    if jax is not None:
        for d in jax.local_devices():
            stats = d.memory_stats() or {}
            for key in ("bytes_in_use", "pool_bytes", "bytes_reserved"):
                if key in stats:
                    line["jax_%s_%s" % (d.id, key)] = stats[key] // MIB
    sys.stderr.write("planted.py: %s (MiB) %s\n" % (what, line))


def cost():
    """``planted.py --cost`` (bare, without memrel): plants one cycle's load,
    then times what the module reads at an edge, median of 7 batches of 200."""
    import time

    live = torch.ones(256 * MIB, dtype=torch.uint8, device="cuda")
    torch.ones(1024 * MIB, dtype=torch.uint8, device="cuda")
    torch.ones(512 * MIB, dtype=torch.uint8).pin_memory()
    if jax is not None:
        jnp.ones(4).block_until_ready()
    torch.cuda.synchronize()

    def us(fn):
        fn()
        runs = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(200):
                fn()
            runs.append((time.perf_counter() - t) / 200 * 1e6)
        return sorted(runs)[3]

    print("views: %s" % memrel._views())
    print("per edge (us): heap view %.1f, frameworks' views %.1f, both %.1f, /proc/self/status %.1f" % (
        us(memrel._heap_view), us(memrel._views),
        us(lambda: (memrel._heap_view(), memrel._views())), us(memrel._memory)))
    del live


if "--cost" in sys.argv:
    cost()
    sys.exit(0)

memrel.baseline(0.5)
for cycle in range(memrel.cycles()):
    with memrel.phase("load", model="planted"):
        live = torch.ones(256 * MIB, dtype=torch.uint8, device="cuda")
        big = torch.ones(1024 * MIB, dtype=torch.uint8, device="cuda")
        del big  # back to PyTorch's cache, not to CUDA
        pinned = torch.ones(512 * MIB, dtype=torch.uint8).pin_memory()
        del pinned  # back to PyTorch's pinned host cache
        if jax is not None:
            a = jnp.ones((256 * MIB) // 4, dtype=jnp.float32)
            a.block_until_ready()
            del a  # back to XLA's pool
        torch.cuda.synchronize()
    report("cycle %d after the load" % (cycle + 1))
    with memrel.phase("unload", model="planted"):
        del live
        torch.cuda.synchronize()
    report("cycle %d after the unload" % (cycle + 1))
    memrel.release()
    memrel.settle(0.5)
