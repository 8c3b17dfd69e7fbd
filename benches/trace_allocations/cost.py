"""What memrel's --trace-allocations costs a program (docs/guide.md, "Where
the live bytes were allocated"), run by hand:

    python3 benches/trace_allocations/cost.py [--repeats 5]

Drives the module's tracer (python/memrel/_trace.py) as memrel's phase
edges do, in this process without memrel (the channel unset), for two loads:
`bytearrays`, the test fixture's (48 + 16 MiB in 1 MiB blocks: few, large
allocations), and `objects`, 500 000 small dicts (many small allocations,
where tracemalloc's cost per allocation shows). For each, median over the
repeats: the load's time without and with tracing, the snapshot + compare +
write at the unload's end, and tracemalloc's own memory there.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from memrel import _trace  # noqa: E402  (the tracer memrel ships)


def bytearrays():
    scratch = [bytearray(1 << 20) for _ in range(16)]
    held = [bytearray(1 << 20) for _ in range(48)]
    del scratch
    return held


def objects():
    return [{"i": i, "name": "row-%d" % i} for i in range(500_000)]


def once(load, traced):
    """(load s, edge s, tracemalloc bytes) of one load, traced or not."""
    with tempfile.TemporaryDirectory() as d:
        tracer = _trace.Tracer(os.path.join(d, "allocations.csv")) if traced else None
        if tracer is not None:
            tracer.at_begin("load")
        t0 = time.perf_counter()
        held = load()
        load_s = time.perf_counter() - t0
        edge_s, own = 0.0, 0
        if tracer is not None:
            tracer.at_begin("unload")
            own = tracemalloc.get_tracemalloc_memory()
            t1 = time.perf_counter()
            tracer.at_end("unload")
            edge_s = time.perf_counter() - t1
            tracemalloc.stop()
        del held
    return load_s, edge_s, own


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    print("python %s, %d CPUs, load average %.1f" % (
        sys.version.split()[0], os.cpu_count() or 0, os.getloadavg()[0]))
    print("%-10s %12s %12s %8s %16s %18s" % (
        "load", "off ms", "traced ms", "x", "snapshot ms", "tracemalloc MiB"))
    for name, load in (("bytearrays", bytearrays), ("objects", objects)):
        off = [once(load, False)[0] for _ in range(args.repeats)]
        on = [once(load, True) for _ in range(args.repeats)]
        off_ms = statistics.median(off) * 1e3
        on_ms = statistics.median(r[0] for r in on) * 1e3
        edge_ms = statistics.median(r[1] for r in on) * 1e3
        own_mib = statistics.median(r[2] for r in on) / (1 << 20)
        print("%-10s %12.1f %12.1f %8.1f %16.1f %18.1f" % (
            name, off_ms, on_ms, on_ms / off_ms, edge_ms, own_mib))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
