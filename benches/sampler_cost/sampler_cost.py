"""What memrel's sampling costs at 1 kHz (issue 26, line 5): the sampler
thread's share of a core and the whole memrel process's CPU for
`memrel exec --interval-ms 1 -- sleep 10`, for one or more binaries, in
turn (A B A B ...), so two builds are compared on one machine at one time.

Why it exists: the overhead harness (benches/overhead) measures everything
memrel costs and takes ten minutes; this one answers the two questions the
sampler's budget is about, in a few minutes, and is the one to run before
and after a change to the sampler loop.

How: each run is started and watched by benches/overhead/overhead.py's
`measure` (posix_spawn, a pidfd, every --poll-ms each thread's
se.sum_exec_runtime from /proc/PID/task/TID/sched, ns resolution; the
zombie's process CPU clock before it is reaped). Reported per binary:
  sampler % of a core = the memrel-sampler thread's CPU / the span it was
                        seen alive (its first to its last poll);
  memrel CPU s        = the whole memrel process (every thread, start-up,
                        record, metrics and chart included; not `sleep`);
  memrel % of run     = memrel CPU / the program's 10 s.
Standard library only; Linux only.

  python3 benches/sampler_cost/sampler_cost.py --runs 5 OLD_MEMREL NEW_MEMREL
"""

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "overhead"))
import overhead  # noqa: E402  (the measuring code is shared, not copied)


def one_run(memrel, seconds, interval_ms, poll_s, workdir, label):
    out = tempfile.mkdtemp(prefix="memrel-sampler-cost-", dir=workdir)
    argv = [memrel, "exec", "--interval-ms", str(interval_ms), "--out", out,
            "--", "sleep", str(seconds)]
    r = overhead.measure(argv, dict(os.environ), workdir, poll_s, label)
    window = r["window_s"]
    sampler = r["sampler_window_cpu_s"]
    return {
        "sampler_pct": None if not window or sampler is None else 100.0 * sampler / window,
        "memrel_cpu_s": r["self_cpu_s"],
        "memrel_pct": None if r["self_cpu_s"] is None else 100.0 * r["self_cpu_s"] / seconds,
        "wall_s": r["wall_s"],
        "machine_busy_cores": r["machine_busy_cores"],
    }


def describe(values, fmt):
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    return "%s (%s-%s, n=%d)" % (fmt % statistics.median(vals), fmt % min(vals),
                                 fmt % max(vals), len(vals))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("memrel", nargs="+", help="memrel binaries to compare, run in turn")
    p.add_argument("--runs", type=int, default=5, help="runs of each binary (default 5)")
    p.add_argument("--seconds", type=float, default=10.0, help="how long sleep runs (default 10)")
    p.add_argument("--interval-ms", type=float, default=1.0, help="sampling interval (default 1)")
    p.add_argument("--poll-ms", type=float, default=100.0,
                   help="how often the driver reads the threads (default 100)")
    args = p.parse_args(argv)
    for m in args.memrel:
        if not os.access(m, os.X_OK):
            print("sampler_cost.py: %s is not an executable memrel: build it first "
                  "(cargo build --release)" % m, file=sys.stderr)
            return 2
    rows = {m: [] for m in args.memrel}
    with tempfile.TemporaryDirectory(prefix="memrel-sampler-cost-") as work:
        for i in range(args.runs):
            for j, m in enumerate(args.memrel):
                r = one_run(m, args.seconds, args.interval_ms, args.poll_ms / 1000.0, work,
                            "run%d-%d" % (i, j))
                rows[m].append(r)
                print("run %d %s: sampler %.3f %% of a core, memrel %.3f s CPU (%.2f %% of %g s), "
                      "machine busy %.2f cores" % (i + 1, m, r["sampler_pct"] or float("nan"),
                                                   r["memrel_cpu_s"] or float("nan"),
                                                   r["memrel_pct"] or float("nan"), args.seconds,
                                                   r["machine_busy_cores"]), flush=True)
    print()
    print("| binary | sampler thread, % of a core | memrel process CPU s | memrel, % of the run |")
    print("|---|---|---|---|")
    for m in args.memrel:
        rs = rows[m]
        print("| %s | %s | %s | %s |" % (
            m, describe([r["sampler_pct"] for r in rs], "%.3f"),
            describe([r["memrel_cpu_s"] for r in rs], "%.3f"),
            describe([r["memrel_pct"] for r in rs], "%.2f")))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except overhead.DriverError as e:
        print("sampler_cost.py: %s" % e, file=sys.stderr)
        sys.exit(2)
