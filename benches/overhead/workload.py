"""A model-swapping program that times itself, run bare and under `memrel exec`.

Why it exists: to measure memrel's overhead on a program we need the same
program's own account of its work with and without memrel around it. This
one behaves like a server that swaps models: each cycle it "loads" a model
(a bytearray of --mib MiB, every page written), runs a "forward" pass over it
(--passes SHA-256 passes over the buffer), "unloads" it (del), calls
memrel.release() and then sleeps --idle-ms in an idle phase. It marks every
phase with memrel's own Python module, which does nothing (beyond reading
/proc/self/status at each edge, in both settings) when MEMREL_EVENT_FD is
unset, so the bare run executes exactly the same Python code.

It writes what it measured, as JSON, to --report (an absolute path: under
memrel its stdout is drained into a tail). Times are the program's own:
`work_s` is the sum of the load, forward and unload phases (time.perf_counter),
`work_min_cycle_s` the fastest cycle's work (the least disturbed by other
load on the machine), `idle_s` the sum of the idle phases, `elapsed_s` from
the first cycle to the last, `cpu_s` the process's CPU (time.process_time)
over the same span.

Standard library only (plus the memrel module memrel ships).
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import time

MIB = 1024 * 1024
PAGE_BYTES = os.sysconf("SC_PAGESIZE")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cycles", type=int, default=10, help="load/forward/unload/idle cycles")
    p.add_argument("--mib", type=int, default=64, help="MiB per model load")
    p.add_argument("--passes", type=int, default=2, help="SHA-256 passes over the model per forward")
    p.add_argument("--idle-ms", type=float, default=200.0, help="sleep after each cycle, in ms")
    p.add_argument("--report", help="write the JSON report here (absolute path)")
    p.add_argument(
        "--copy-memrel-module",
        metavar="DIR",
        help="copy the memrel module this process imported into DIR and exit "
        "(the driver runs this once under memrel, so the bare runs import the same module)",
    )
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    try:
        import memrel  # noqa: F401  (memrel puts it on PYTHONPATH; the driver does for bare runs)
    except ImportError:
        sys.exit(
            "workload.py: cannot import the memrel module: run it under `memrel exec`, "
            "or put the directory holding memrel.py on PYTHONPATH"
        )
    if args.copy_memrel_module:
        os.makedirs(args.copy_memrel_module, exist_ok=True)
        shutil.copy(memrel.__file__, os.path.join(args.copy_memrel_module, "memrel.py"))
        return 0
    if not args.report:
        sys.exit("workload.py: --report PATH is required")

    load_s = forward_s = unload_s = idle_s = release_s = 0.0
    cycle_work_s = []
    digest = b""
    size_bytes = args.mib * MIB
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for _ in range(args.cycles):
        a = time.perf_counter()
        with memrel.phase("load", model="m"):
            model = bytearray(size_bytes)  # zero-filled: every page written
        b = time.perf_counter()
        with memrel.phase("forward", model="m"):
            view = memoryview(model)
            for _ in range(args.passes):
                digest = hashlib.sha256(view).digest()
            view.release()
        c = time.perf_counter()
        with memrel.phase("unload", model="m"):
            del model
        d = time.perf_counter()
        memrel.release()
        e = time.perf_counter()
        with memrel.phase("idle"):
            time.sleep(args.idle_ms / 1000.0)
        f = time.perf_counter()
        cycle_work_s.append(d - a)
        load_s += b - a
        forward_s += c - b
        unload_s += d - c
        release_s += e - d
        idle_s += f - e
    elapsed_s = time.perf_counter() - t0
    cpu_s = time.process_time() - cpu0
    report = {
        "under_memrel": bool(os.environ.get("MEMREL_STRATEGY")),
        "cycles": args.cycles,
        "mib": args.mib,
        "passes": args.passes,
        "idle_ms": args.idle_ms,
        "work_s": load_s + forward_s + unload_s,
        "work_min_cycle_s": min(cycle_work_s),
        "work_median_cycle_s": sorted(cycle_work_s)[len(cycle_work_s) // 2],
        "load_s": load_s,
        "forward_s": forward_s,
        "unload_s": unload_s,
        "release_s": release_s,
        "idle_s": idle_s,
        "elapsed_s": elapsed_s,
        "cpu_s": cpu_s,
        "digest": digest.hex()[:16],
    }
    tmp = args.report + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f)
    os.replace(tmp, args.report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
