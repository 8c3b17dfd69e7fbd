"""Measures the overhead of the memrel harness itself (issue 15, item 4).

Why it exists: memrel samples a process from outside and writes outputs and
charts after every run; a user needs to know what that costs them in wall
time and CPU, and whether the numbers memrel reports are disturbed by it.
This driver runs the same workloads bare and under memrel on one machine and
writes what it measured:

1. bare vs measured: a Python program that swaps models and times itself
   (workload.py), run directly and under `memrel exec` at 10 ms and 1 ms;
2. the fixed cost of one run: `memrel exec -- true`, `-- python3 -c pass`
   (each beside the same program bare) and `memrel run` of a near-empty fake
   scenario (one 1 MiB fake model, no baseline, no idle);
3. growth: `memrel run` of fake scenarios that idle for several lengths at
   1 ms and 10 ms; linear fits give the fixed part and the cost per second
   and per sample; `memrel report` re-renders each result directory, which
   times the outputs and charts alone;
4. the sampler thread's own CPU at 1 ms, apart from the orchestrator.

How a process is measured (`measure`): it is started with posix_spawn and
watched through a pidfd; every --poll-ms the driver reads its
/proc/PID/status (VmHWM) and /proc/PID/task/TID/sched (each thread's
se.sum_exec_runtime, in ns) and which children it has. When it exits the
driver first waits for it without reaping it (waitid WNOWAIT) and reads the
zombie: its process CPU clock (clock_gettime on the process's CPU clock: all
of its threads, dead ones included, not its children; ns resolution) and
/proc/PID/stat (utime, stime, cutime, cstime in clock ticks, a cross-check);
then it reaps it with wait4, whose rusage is the process plus every child it
reaped (memrel's worker or program). So for memrel:
  parent (self) CPU = the process CPU clock at exit,
  worker/program CPU = wait4's user+sys − parent CPU.
The driver polls bare programs the same way, so its own reads disturb both
sides alike; its own CPU per trial is recorded too.

Standard library only. Linux only (procfs, pidfd, waitid). Run it through
run.sh; `--help` lists the knobs.
"""

import argparse
import csv
import datetime
import glob
import hashlib
import json
import math
import os
import platform
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "workload.py")
CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
SAMPLER_THREAD = "memrel-sampler"


class DriverError(Exception):
    """A problem the driver reports in one line and exits 2 on."""


# --------------------------------------------------------------------- procfs


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def thread_sched(pid, tid):
    """(thread name, CPU seconds) from /proc/PID/task/TID/sched, or None."""
    data = read_text("/proc/%d/task/%d/sched" % (pid, tid))
    if not data:
        return None
    head = data.split(b"\n", 1)[0]
    name = head.rsplit(b" (", 1)[0].decode("utf-8", "replace")
    i = data.find(b"se.sum_exec_runtime")
    if i < 0:
        return None
    colon = data.index(b":", i)
    nl = data.find(b"\n", colon)
    return name, float(data[colon + 1 : nl]) / 1000.0  # ms → s


def status_kib(pid, key):
    """A `Key:   N kB` field of /proc/PID/status, in KiB, or None."""
    data = read_text("/proc/%d/status" % pid)
    if not data:
        return None
    i = data.find(b"\n" + key + b":")
    if i < 0:
        return None
    return int(data[i + len(key) + 2 : data.index(b"\n", i + 1)].split()[0])


def stat_ticks(pid):
    """utime, stime, cutime, cstime (seconds, clock-tick resolution) of PID."""
    data = read_text("/proc/%d/stat" % pid)
    if not data:
        return None
    fields = data.rsplit(b")", 1)[1].split()
    # fields[0] is field 3 (state); utime is field 14.
    utime, stime, cutime, cstime = (int(x) / CLK_TCK for x in fields[11:15])
    return utime, stime, cutime, cstime


def process_cpu_clock_s(pid):
    """The CPU clock of process PID (all its threads; not its children)."""
    clock_id = ((~pid) << 3) | 2  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    return time.clock_gettime(clock_id)


def machine_cpu_ticks():
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    line = read_text("/proc/stat").split(b"\n", 1)[0].split()[1:]
    vals = [int(x) for x in line]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    total = sum(vals[:8])
    return total - idle, total


# -------------------------------------------------------------------- measure


class ThreadObs(object):
    __slots__ = ("name", "first_t", "first_cpu", "last_t", "last_cpu")

    def __init__(self, name, t, cpu):
        self.name = name
        self.first_t = self.last_t = t
        self.first_cpu = self.last_cpu = cpu


def measure(argv, env, workdir, poll_s, label):
    """Runs argv, watching it as the module docstring says; returns a dict."""
    path = argv[0]
    if not os.path.isabs(path):
        found = shutil.which(path)
        if not found:
            raise DriverError("cannot find %r on PATH" % path)
        path = found
    out_path = os.path.join(workdir, "%s.stdout" % label)
    err_path = os.path.join(workdir, "%s.stderr" % label)
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        (os.POSIX_SPAWN_OPEN, 2, err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
    ]
    busy0, total0 = machine_cpu_ticks()
    driver_cpu0 = time.process_time()
    t0 = time.monotonic()
    pid = os.posix_spawn(path, argv, env, file_actions=actions)
    pidfd = os.pidfd_open(pid)
    waiter = select.poll()
    waiter.register(pidfd, select.POLLIN)
    poll_ms = max(1, int(round(poll_s * 1000)))
    threads = {}
    main_history = []  # (t, main thread CPU) at every poll that read it
    hwm_kib = 0
    child_first_t = child_last_t = None
    try:
        while True:
            if waiter.poll(poll_ms):
                break
            now = time.monotonic() - t0
            hwm = status_kib(pid, b"VmHWM")
            if hwm:
                hwm_kib = max(hwm_kib, hwm)
            try:
                tids = os.listdir("/proc/%d/task" % pid)
            except OSError:
                tids = []
            for tid_text in tids:
                tid = int(tid_text)
                got = thread_sched(pid, tid)
                if got is None:
                    continue
                name, cpu = got
                if tid == pid:
                    main_history.append((now, cpu))
                obs = threads.get(tid)
                if obs is None:
                    threads[tid] = ThreadObs(name, now, cpu)
                else:
                    obs.name, obs.last_t, obs.last_cpu = name, now, cpu
            kids = read_text("/proc/%d/task/%d/children" % (pid, pid))
            if kids and kids.strip():
                if child_first_t is None:
                    child_first_t = now
                child_last_t = now
        wall_s = time.monotonic() - t0
        # The zombie: nothing runs any more, nothing is released yet.
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        try:
            self_cpu_s = process_cpu_clock_s(pid)
        except OSError:
            self_cpu_s = None
        ticks = stat_ticks(pid)
        leader = thread_sched(pid, pid)
        if leader is not None:
            obs = threads.get(pid)
            if obs is None:
                threads[pid] = ThreadObs(leader[0], wall_s, leader[1])
            else:
                obs.last_t, obs.last_cpu = wall_s, leader[1]
        _, status, ru = os.wait4(pid, 0)
    finally:
        os.close(pidfd)
    driver_cpu_s = time.process_time() - driver_cpu0
    busy1, total1 = machine_cpu_ticks()
    exit_code = os.waitstatus_to_exitcode(status)
    total_cpu_s = ru.ru_utime + ru.ru_stime
    if self_cpu_s is None and ticks is not None:
        self_cpu_s = ticks[0] + ticks[1]
    r = {
        "label": label,
        "exit_code": exit_code,
        "wall_s": wall_s,
        "total_cpu_s": total_cpu_s,
        "self_cpu_s": self_cpu_s,
        "children_cpu_s": None if self_cpu_s is None else max(0.0, total_cpu_s - self_cpu_s),
        "self_cpu_ticks_s": None if ticks is None else ticks[0] + ticks[1],
        "self_user_ticks_s": None if ticks is None else ticks[0],
        "self_sys_ticks_s": None if ticks is None else ticks[1],
        "children_cpu_ticks_s": None if ticks is None else ticks[2] + ticks[3],
        "ru_maxrss_bytes": ru.ru_maxrss * 1024,
        "vm_hwm_bytes": hwm_kib * 1024 if hwm_kib else None,
        "child_first_seen_s": child_first_t,
        "child_last_seen_s": child_last_t,
        "driver_cpu_s": driver_cpu_s,
        "machine_busy_cores": (busy1 - busy0) / max(1, total1 - total0) * NCPU,
        "stdout_path": out_path,
        "stderr_path": err_path,
    }
    r.update(thread_breakdown(pid, threads, main_history, self_cpu_s))
    if exit_code != 0:
        tail = (read_text(err_path) or b"")[-800:].decode("utf-8", "replace")
        raise DriverError(
            "%s exited %d: %s\nstderr tail:\n%s" % (label, exit_code, " ".join(argv), tail)
        )
    return r


def thread_breakdown(pid, threads, main_history, self_cpu_s):
    """Splits the process's CPU by thread: the main thread (memrel's
    orchestrator: start-up, the run loop's poll tick, outputs), the sampler
    thread(s), and every other thread (event reader, output drains).

    The run's window is the span in which a sampler thread was seen alive
    (from the first to the last poll that saw one); the main thread's CPU
    is split at the same polls into before, during and after that window.
    Each edge is only as sharp as --poll-ms."""
    main = threads.get(pid)
    samplers = [o for o in threads.values() if o.name == SAMPLER_THREAD]
    others = [o for tid, o in threads.items() if tid != pid and o.name != SAMPLER_THREAD]
    r = {
        "main_cpu_s": main.last_cpu if main else None,
        "sampler_cpu_s": sum(o.last_cpu for o in samplers) if samplers else None,
        "other_threads_cpu_s": sum(o.last_cpu for o in others),
        "threads_seen": len(threads),
        "window_s": None,
        "sampler_window_cpu_s": None,
        "main_before_window_cpu_s": None,
        "main_window_cpu_s": None,
        "main_after_window_cpu_s": None,
        "other_window_cpu_s": None,
    }
    seen = sum(o.last_cpu for o in threads.values())
    r["unobserved_cpu_s"] = None if self_cpu_s is None else self_cpu_s - seen
    if samplers and main:
        w0 = min(o.first_t for o in samplers)
        w1 = max(o.last_t for o in samplers)
        at = dict(main_history)
        if w1 > w0 and w0 in at and w1 in at:
            r["window_s"] = w1 - w0
            r["sampler_window_cpu_s"] = sum(o.last_cpu - o.first_cpu for o in samplers)
            r["main_before_window_cpu_s"] = at[w0]
            r["main_window_cpu_s"] = at[w1] - at[w0]
            r["main_after_window_cpu_s"] = main.last_cpu - at[w1]
            # Other threads that lived through the window (reader, drains).
            r["other_window_cpu_s"] = sum(
                o.last_cpu - o.first_cpu for o in others if o.first_t <= w0 and o.last_t >= w1
            )
    return r


# ---------------------------------------------------------------- statistics


def summary(values):
    """n, median, min, max of the values that are not None."""
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return {"n": 0, "median": None, "min": None, "max": None}
    return {"n": len(vals), "median": statistics.median(vals), "min": min(vals), "max": max(vals)}


def linear_fit(xs, ys):
    """Least squares y = c0 + c1·x1 + … for rows xs (tuples); coefficients and R²."""
    rows = [(1.0,) + tuple(float(v) for v in x) for x, y in zip(xs, ys) if y is not None]
    yv = [float(y) for y in ys if y is not None]
    k = len(rows[0]) if rows else 0
    if len(rows) <= k:
        return None
    # Normal equations A·c = b, solved by Gaussian elimination with pivoting.
    a = [[sum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    b = [sum(r[i] * y for r, y in zip(rows, yv)) for i in range(k)]
    for col in range(k):
        piv = max(range(col, k), key=lambda r: abs(a[r][col]))
        if abs(a[piv][col]) < 1e-300:
            return None
        a[col], a[piv] = a[piv], a[col]
        b[col], b[piv] = b[piv], b[col]
        for r in range(k):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
                b[r] -= f * b[col]
    coef = [b[i] / a[i][i] for i in range(k)]
    mean = sum(yv) / len(yv)
    ss_tot = sum((y - mean) ** 2 for y in yv)
    ss_res = sum((y - sum(c * v for c, v in zip(coef, r))) ** 2 for r, y in zip(rows, yv))
    return {"coef": coef, "r2": 1 - ss_res / ss_tot if ss_tot > 0 else None, "n": len(rows)}


# ------------------------------------------------------------------ the bench


FAKE_SCENARIO = """description = "overhead bench: {what}"
cycles = 1
strategies = ["drop"]
interval_ms = 10
timeout_s = {timeout_s}

[models.m]
fake_anon_mib = 1

[workload]
steps = [{steps}]
baseline_ms = 0
settle_ms = 0
"""


class Bench(object):
    """The trials, in the order they ran, and what they need."""

    def __init__(self, args, workdir):
        self.args = args
        self.memrel = args.memrel
        self.workdir = workdir
        self.poll_s = args.poll_ms / 1000.0
        self.rows = []
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.python = sys.executable
        self.counter = 0

    def log(self, text):
        sys.stderr.write("overhead: %s\n" % text)
        sys.stderr.flush()

    def _label(self, config):
        self.counter += 1
        return "%04d-%s" % (self.counter, config.replace(" ", "_").replace("/", "_"))

    def trial(self, section, config, rep, argv, env=None, **extra):
        """Measures one process and keeps its row."""
        label = self._label(config)
        r = measure(argv, env or self.env, self.workdir, self.poll_s, label)
        row = {"section": section, "config": config, "rep": rep}
        row.update(extra)
        row.update(r)
        self.rows.append(row)
        return row

    def results_dir(self, root):
        found = glob.glob(os.path.join(root, "*", "*", "runs.json"))
        if len(found) != 1:
            raise DriverError("expected one results directory under %s, found %d" % (root, len(found)))
        return os.path.dirname(found[0])

    def read_results(self, row, root):
        """Adds the run's own record (duration, sample count) to `row`."""
        d = self.results_dir(root)
        with open(os.path.join(d, "runs.json")) as f:
            runs = json.load(f)
        run = runs["runs"][0]
        if run.get("status") != "completed":
            raise DriverError("%s: run %s: %s" % (d, run.get("status"), run.get("error")))
        row["run_duration_s"] = run.get("duration_s")
        row["worker_vm_hwm_bytes"] = run.get("vm_hwm_bytes")
        n = 0
        first = last = None
        with open(os.path.join(d, "samples.csv")) as f:
            next(f)
            for line in f:
                t = line.split(",", 1)[0]
                if first is None:
                    first = float(t)
                last = t
                n += 1
        row["samples"] = n
        row["sampled_span_s"] = (float(last) - first) if n > 1 else None
        # How long after the worker's last phase edge the run ended: the
        # orchestrator noticing the exit (its poll tick), reaping the worker
        # and stopping the sampler (which sleeps one interval at most).
        last_edge = None
        with open(os.path.join(d, "events.csv")) as f:
            next(f)
            for line in f:
                t = float(line.split(",", 1)[0])
                last_edge = t if last_edge is None else max(last_edge, t)
        row["last_edge_s"] = last_edge
        row["end_lag_s"] = (None if last_edge is None or row["run_duration_s"] is None
                            else row["run_duration_s"] - last_edge)
        row["results_bytes"] = sum(
            os.path.getsize(p) for p in glob.glob(os.path.join(d, "*")) if os.path.isfile(p)
        )
        return d

    def scenario(self, name, what, steps, timeout_s):
        path = os.path.join(self.workdir, "%s.toml" % name)
        with open(path, "w") as f:
            f.write(
                FAKE_SCENARIO.format(
                    what=what,
                    steps=", ".join('"%s"' % s for s in steps),
                    timeout_s=timeout_s,
                )
            )
        return path

    def fresh_root(self, label):
        root = os.path.join(self.workdir, "results", label)
        os.makedirs(root)
        return root

    def cleanup(self, path):
        if not self.args.keep_runs:
            shutil.rmtree(path, ignore_errors=True)

    # ------------------------------------------------------------ sections

    def copy_module(self):
        """Runs workload.py once under memrel to copy the memrel module it
        gets, so the bare runs import exactly the module of this binary."""
        mod_dir = os.path.join(self.workdir, "memrel-module")
        root = self.fresh_root("module")
        argv = [self.memrel, "exec", "--out", root, "--", self.python, WORKLOAD,
                "--copy-memrel-module", mod_dir]
        measure(argv, self.env, self.workdir, self.poll_s, "copy-module")
        if not os.path.isfile(os.path.join(mod_dir, "memrel.py")):
            raise DriverError("memrel exec did not give workload.py a memrel module")
        self.cleanup(root)
        return mod_dir

    def fixed(self):
        """Fixed cost per run: near-empty programs and a near-empty fake run."""
        a = self.args
        empty = self.scenario("overhead-empty", "one 1 MiB fake load and unload, nothing else",
                              ["load m", "unload m"], 60)
        for rep in range(1, a.fixed_repeats + 1):
            self.trial("fixed", "memrel --version", rep, [self.memrel, "--version"])
            for prog, name in ((["/bin/true"], "true"), ([self.python, "-c", "pass"], "python3 -c pass")):
                self.trial("fixed", "%s bare" % name, rep, prog)
                root = self.fresh_root("fixed-%s-%d" % (name.split()[0], rep))
                row = self.trial("fixed", "memrel exec -- %s" % name, rep,
                                 [self.memrel, "exec", "--out", root, "--"] + prog)
                self.read_results(row, root)
                self.cleanup(root)
            for interval_ms in a.intervals_ms:
                root = self.fresh_root("fixed-run-%d-%s" % (rep, interval_ms))
                row = self.trial("fixed", "memrel run empty fake @%g ms" % interval_ms, rep,
                                 [self.memrel, "run", "--scenario", empty, "--out", root,
                                  "--interval-ms", "%g" % interval_ms],
                                 interval_ms=interval_ms)
                d = self.read_results(row, root)
                self.report(d, "fixed", "memrel report (empty fake @%g ms)" % interval_ms, rep,
                            interval_ms=interval_ms)
                self.cleanup(root)
        self.log("fixed cost: %d repetitions done" % a.fixed_repeats)

    def report(self, results_dir, section, config, rep, **extra):
        out = os.path.join(self.workdir, "rerender-%d" % (self.counter + 1))
        row = self.trial(section, config, rep, [self.memrel, "report", results_dir, "--out", out],
                         **extra)
        shutil.rmtree(out, ignore_errors=True)
        return row

    def program(self, mod_dir):
        """The same Python program bare and under `memrel exec`."""
        a = self.args
        bare_env = dict(self.env)
        bare_env["PYTHONPATH"] = mod_dir
        wl = ["--cycles", str(a.program_cycles), "--mib", str(a.program_mib),
              "--passes", str(a.program_passes), "--idle-ms", "%g" % a.program_idle_ms]
        configs = [("bare", None)] + [("memrel exec @%g ms" % i, i) for i in a.intervals_ms]
        for rep in range(1, a.program_repeats + 1):
            # The order rotates every repetition, so a load that drifts (a
            # compile starting) does not always hit the same configuration.
            k = (rep - 1) % len(configs)
            for config, interval_ms in configs[k:] + configs[:k]:
                report = os.path.join(self.workdir, "workload-%d.json" % (self.counter + 1))
                prog = [self.python, WORKLOAD] + wl + ["--report", report]
                if interval_ms is None:
                    row = self.trial("program", config, rep, prog, env=bare_env)
                else:
                    root = self.fresh_root("program-%d-%g" % (rep, interval_ms))
                    row = self.trial("program", config, rep,
                                     [self.memrel, "exec", "--interval-ms", "%g" % interval_ms,
                                      "--out", root, "--"] + prog, interval_ms=interval_ms)
                    self.read_results(row, root)
                    self.cleanup(root)
                with open(report) as f:
                    got = json.load(f)
                if got["under_memrel"] != (interval_ms is not None):
                    raise DriverError("workload.py under_memrel=%s in config %r"
                                      % (got["under_memrel"], config))
                for key in ("work_s", "work_min_cycle_s", "load_s", "forward_s", "unload_s", "release_s", "idle_s",
                            "elapsed_s", "cpu_s"):
                    row["workload_" + key] = got[key]
                os.remove(report)
                self.log("program %d/%d %-20s wall %.3f s, work %.3f s, parent CPU %s"
                         % (rep, a.program_repeats, config, row["wall_s"], got["work_s"],
                            "-" if interval_ms is None else "%.3f s" % row["self_cpu_s"]))

    def growth(self):
        """Idle fake runs of several lengths at each interval; each result
        directory is also re-rendered by `memrel report`."""
        a = self.args
        scen = {}
        for length_s in a.lengths_s:
            scen[length_s] = self.scenario(
                "overhead-idle-%gs" % length_s, "idle %g s" % length_s,
                ["load m", "unload m", "idle %d" % int(round(length_s * 1000))],
                int(length_s + 300))
        total = a.repeats * len(a.lengths_s) * len(a.intervals_ms)
        done = 0
        for rep in range(1, a.repeats + 1):
            for length_s in a.lengths_s:
                for interval_ms in a.intervals_ms:
                    root = self.fresh_root("growth-%d-%g-%g" % (rep, length_s, interval_ms))
                    config = "idle %g s @%g ms" % (length_s, interval_ms)
                    row = self.trial("growth", config, rep,
                                     [self.memrel, "run", "--scenario", scen[length_s],
                                      "--out", root, "--interval-ms", "%g" % interval_ms],
                                     interval_ms=interval_ms, length_s=length_s)
                    d = self.read_results(row, root)
                    rr = self.report(d, "report", "memrel report of " + config, rep,
                                     interval_ms=interval_ms, length_s=length_s)
                    rr["samples"] = row["samples"]
                    rr["results_bytes"] = row["results_bytes"]
                    self.cleanup(root)
                    done += 1
                    self.log("growth %d/%d %-18s wall %.3f s, parent CPU %.3f s, sampler %.3f s, "
                             "%d samples, report %.3f s"
                             % (done, total, config, row["wall_s"], row["self_cpu_s"],
                                row["sampler_cpu_s"] or 0, row["samples"], rr["wall_s"]))

    def perf_profile(self):
        """One idle run at the smallest interval under `perf record` (a
        separate run, not used for any number above): where the parent's
        CPU goes, by thread and symbol."""
        a = self.args
        perf = shutil.which("perf")
        if not perf or a.perf_length_s <= 0:
            return None
        interval_ms = min(a.intervals_ms)
        scen = self.scenario("overhead-perf", "idle %g s under perf" % a.perf_length_s,
                             ["load m", "unload m", "idle %d" % int(a.perf_length_s * 1000)],
                             int(a.perf_length_s + 300))
        root = self.fresh_root("perf")
        data = os.path.join(self.workdir, "perf.data")
        argv = [perf, "record", "-q", "-F", str(a.perf_hz), "-o", data, "--",
                self.memrel, "run", "--scenario", scen, "--out", root,
                "--interval-ms", "%g" % interval_ms]
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=self.workdir)
        if proc.returncode != 0:
            self.log("perf record failed (%d), no profile: %s"
                     % (proc.returncode, proc.stderr.decode("utf-8", "replace")[-300:]))
            return None
        d = self.results_dir(root)
        with open(os.path.join(d, "runs.json")) as f:
            worker_pid = json.load(f)["runs"][0]["pid"]
        script = subprocess.run([perf, "script", "-i", data, "-F", "pid,tid,comm,ip,sym"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.cleanup(root)
        return summarize_perf(script.stdout.decode("utf-8", "replace"), worker_pid, interval_ms,
                              a.perf_length_s, a.perf_hz)


def summarize_perf(text, worker_pid, interval_ms, length_s, hz):
    """Samples per thread role and the top symbols of each, from perf script."""
    import re

    line_re = re.compile(r"^\s*(.*?)\s+(\d+)/(\d+)\s+([0-9a-f]+)\s+(.*)$")
    samples = []
    for line in text.splitlines():
        m = line_re.match(line)
        if m:
            comm, pid, tid, ip, sym = m.groups()
            samples.append((comm, int(pid), int(tid), int(ip, 16) >= 0xFFFF800000000000, sym.strip()))
    parent_pids = {pid for comm, pid, tid, k, s in samples if comm == SAMPLER_THREAD}
    roles = {}
    for comm, pid, tid, kernel, sym in samples:
        if pid in parent_pids:
            role = ("memrel sampler thread" if comm == SAMPLER_THREAD
                    else "memrel main thread" if tid == pid else "memrel other threads")
        elif pid == worker_pid:
            role = "worker process"
        else:
            role = "other processes (perf itself, ...)"
        entry = roles.setdefault(role, {"samples": 0, "kernel_samples": 0, "symbols": {}})
        entry["samples"] += 1
        entry["kernel_samples"] += kernel
        key = ("[k] " if kernel else "[.] ") + sym
        entry["symbols"][key] = entry["symbols"].get(key, 0) + 1
    out = {"interval_ms": interval_ms, "length_s": length_s, "frequency_hz": hz,
           "total_samples": len(samples), "roles": {}}
    for role, e in sorted(roles.items(), key=lambda kv: -kv[1]["samples"]):
        top = sorted(e["symbols"].items(), key=lambda kv: -kv[1])[:10]
        out["roles"][role] = {
            "samples": e["samples"],
            "cpu_s_estimate": e["samples"] / float(hz),
            "kernel_pct": 100.0 * e["kernel_samples"] / e["samples"],
            "top_symbols": [{"symbol": s, "samples": n, "pct_of_role": 100.0 * n / e["samples"]}
                            for s, n in top],
        }
    return out


# ------------------------------------------------------------------- analysis


def rows_of(rows, section, config=None, **match):
    out = []
    for r in rows:
        if r["section"] != section or (config is not None and r["config"] != config):
            continue
        if all(r.get(k) == v for k, v in match.items()):
            out.append(r)
    return out


def configs_in_order(rows, section):
    seen = []
    for r in rows:
        if r["section"] == section and r["config"] not in seen:
            seen.append(r["config"])
    return seen


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def analyze(rows, args):
    res = {"fixed": [], "fixed_paired": [], "program": [], "growth": [], "fits": {},
           "threads_at_min_interval": {}, "targets": {}, "machine_busy_cores": {}}

    for section in ("fixed", "program", "growth", "report"):
        res["machine_busy_cores"][section] = summary(
            [r["machine_busy_cores"] for r in rows if r["section"] == section])
    res["driver_cpu_pct_of_wall"] = summary(
        [100 * r["driver_cpu_s"] / r["wall_s"] for r in rows if r["wall_s"] > 0.5])

    # 2. Fixed cost.
    for config in configs_in_order(rows, "fixed"):
        rs = rows_of(rows, "fixed", config)
        res["fixed"].append({
            "config": config,
            "wall_s": summary([r["wall_s"] for r in rs]),
            "parent_cpu_s": summary([r["self_cpu_s"] for r in rs]),
            "children_cpu_s": summary([r["children_cpu_s"] for r in rs]),
            "vm_hwm_bytes": summary([r["vm_hwm_bytes"] for r in rs]),
            "ru_maxrss_bytes": summary([r["ru_maxrss_bytes"] for r in rs]),
            "run_duration_s": summary([r.get("run_duration_s") for r in rs]),
            "outside_run_s": summary([r["wall_s"] - r["run_duration_s"] for r in rs
                                      if r.get("run_duration_s") is not None]),
            "main_thread_cpu_s": summary([r["main_cpu_s"] for r in rs]),
            "end_lag_s": summary([r.get("end_lag_s") for r in rs]),
        })
    for name in ("true", "python3 -c pass"):
        bare = {r["rep"]: r for r in rows_of(rows, "fixed", "%s bare" % name)}
        under = rows_of(rows, "fixed", "memrel exec -- %s" % name)
        res["fixed_paired"].append({
            "program": name,
            "added_wall_s": summary([r["wall_s"] - bare[r["rep"]]["wall_s"] for r in under
                                     if r["rep"] in bare]),
            "parent_cpu_s": summary([r["self_cpu_s"] for r in under]),
        })

    # 1. The program bare and under memrel, paired by repetition.
    bare = {r["rep"]: r for r in rows_of(rows, "program", "bare")}
    bare_work = summary([r["workload_work_s"] for r in bare.values()])
    bare_wall = summary([r["wall_s"] for r in bare.values()])
    bare_cpu = summary([r["self_cpu_s"] for r in bare.values()])

    def spread_pct(s):
        return None if not s["n"] or s["n"] < 2 else 100 * (s["max"] - s["min"]) / s["median"]

    res["program_bare_spread_pct"] = {
        "wall": spread_pct(bare_wall), "work": spread_pct(bare_work), "cpu": spread_pct(bare_cpu),
        "best_cycle": spread_pct(summary([r["workload_work_min_cycle_s"] for r in bare.values()]))}
    for config in sorted(configs_in_order(rows, "program"),
                         key=lambda c: (c != "bare", -(rows_of(rows, "program", c)[0].get("interval_ms") or 0))):
        rs = rows_of(rows, "program", config)
        entry = {
            "config": config,
            "interval_ms": rs[0].get("interval_ms"),
            "wall_s": summary([r["wall_s"] for r in rs]),
            "workload_work_s": summary([r["workload_work_s"] for r in rs]),
            "workload_work_min_cycle_s": summary([r["workload_work_min_cycle_s"] for r in rs]),
            "workload_elapsed_s": summary([r["workload_elapsed_s"] for r in rs]),
            "workload_cpu_s": summary([r["workload_cpu_s"] for r in rs]),
            "workload_idle_s": summary([r["workload_idle_s"] for r in rs]),
            "program_cpu_s": summary([r["children_cpu_s"] if config != "bare" else r["self_cpu_s"]
                                      for r in rs]),
            "parent_cpu_s": summary([r["self_cpu_s"] if config != "bare" else None for r in rs]),
            "parent_cpu_pct_of_wall": summary([100 * r["self_cpu_s"] / r["wall_s"]
                                               if config != "bare" else None for r in rs]),
            "samples": summary([r.get("samples") for r in rs]),
            "machine_busy_cores": summary([r["machine_busy_cores"] for r in rs]),
        }
        if config != "bare":
            pairs = [(r, bare[r["rep"]]) for r in rs if r["rep"] in bare]
            entry["wall_overhead_pct"] = summary(
                [100 * (r["wall_s"] - b["wall_s"]) / b["wall_s"] for r, b in pairs])
            entry["added_wall_s"] = summary([r["wall_s"] - b["wall_s"] for r, b in pairs])
            entry["work_slowdown_pct"] = summary(
                [100 * (r["workload_work_s"] - b["workload_work_s"]) / b["workload_work_s"]
                 for r, b in pairs])
            entry["best_cycle_slowdown_pct"] = summary(
                [100 * (r["workload_work_min_cycle_s"] - b["workload_work_min_cycle_s"])
                 / b["workload_work_min_cycle_s"] for r, b in pairs])
            entry["elapsed_slowdown_pct"] = summary(
                [100 * (r["workload_elapsed_s"] - b["workload_elapsed_s"]) / b["workload_elapsed_s"]
                 for r, b in pairs])
            entry["program_cpu_change_pct"] = summary(
                [100 * (r["children_cpu_s"] - b["self_cpu_s"]) / b["self_cpu_s"] for r, b in pairs])
        res["program"].append(entry)

    # 3. Growth.
    growth = rows_of(rows, "growth")
    reports = rows_of(rows, "report")
    for interval_ms in args.intervals_ms:
        for length_s in args.lengths_s:
            rs = rows_of(rows, "growth", interval_ms=interval_ms, length_s=length_s)
            rr = rows_of(rows, "report", interval_ms=interval_ms, length_s=length_s)
            if not rs:
                continue
            res["growth"].append({
                "interval_ms": interval_ms,
                "length_s": length_s,
                "wall_s": summary([r["wall_s"] for r in rs]),
                "added_wall_s": summary([r["wall_s"] - length_s for r in rs]),
                "wall_overhead_pct": summary([100 * (r["wall_s"] - length_s) / length_s for r in rs]),
                "parent_cpu_s": summary([r["self_cpu_s"] for r in rs]),
                "parent_cpu_pct_of_wall": summary([100 * r["self_cpu_s"] / r["wall_s"] for r in rs]),
                "main_cpu_s": summary([r["main_cpu_s"] for r in rs]),
                "main_before_window_cpu_s": summary([r["main_before_window_cpu_s"] for r in rs]),
                "main_window_cpu_s": summary([r["main_window_cpu_s"] for r in rs]),
                "main_after_window_cpu_s": summary([r["main_after_window_cpu_s"] for r in rs]),
                "sampler_cpu_s": summary([r["sampler_cpu_s"] for r in rs]),
                "other_threads_cpu_s": summary([r["other_threads_cpu_s"] for r in rs]),
                "unobserved_cpu_s": summary([r["unobserved_cpu_s"] for r in rs]),
                "sampler_pct_of_core": summary([100 * ratio(r["sampler_window_cpu_s"], r["window_s"])
                                                if r["window_s"] else None for r in rs]),
                "main_pct_of_core_in_run": summary([100 * ratio(r["main_window_cpu_s"], r["window_s"])
                                                    if r["window_s"] else None for r in rs]),
                "worker_cpu_s": summary([r["children_cpu_s"] for r in rs]),
                "samples": summary([r["samples"] for r in rs]),
                "sample_rate_hz": summary([ratio(r["samples"] - 1, r["sampled_span_s"]) for r in rs]),
                "vm_hwm_bytes": summary([r["vm_hwm_bytes"] for r in rs]),
                "results_bytes": summary([r["results_bytes"] for r in rs]),
                "outside_run_s": summary([r["wall_s"] - r["run_duration_s"] for r in rs]),
                "end_lag_s": summary([r["end_lag_s"] for r in rs]),
                "report_wall_s": summary([r["wall_s"] for r in rr]),
                "report_cpu_s": summary([r["self_cpu_s"] for r in rr]),
                "machine_busy_cores": summary([r["machine_busy_cores"] for r in rs]),
            })

    fits = res["fits"]

    def fit(name, rs, xkeys, ykey, unit_note):
        xs = [tuple(r[k] for k in xkeys) for r in rs]
        ys = [r[ykey] for r in rs]
        f = linear_fit(xs, ys)
        if f:
            f.update({"y": ykey, "x": list(xkeys), "note": unit_note})
        fits[name] = f

    for interval_ms in args.intervals_ms:
        rs = [r for r in growth if r["interval_ms"] == interval_ms]
        tag = "%g_ms" % interval_ms
        fit("parent_cpu_s_vs_length_at_" + tag, rs, ("length_s",), "self_cpu_s",
            "intercept: fixed parent CPU (s); slope: parent CPU per second of run (s/s)")
        fit("wall_s_vs_length_at_" + tag, rs, ("length_s",), "wall_s",
            "intercept: fixed wall (s); slope: wall per second of idle (s/s)")
        fit("main_cpu_s_vs_length_at_" + tag, rs, ("length_s",), "main_cpu_s",
            "main (orchestrator) thread: fixed CPU (s) and CPU per second of run")
        fit("sampler_cpu_s_vs_length_at_" + tag, rs, ("length_s",), "sampler_cpu_s",
            "sampler thread: CPU per second of run")
    fit("parent_cpu_s_vs_length_and_samples", growth, ("length_s", "samples"), "self_cpu_s",
        "intercept: fixed (s); per second of run (s/s); per sample (s)")
    fit("sampler_cpu_s_vs_samples", growth, ("samples",), "sampler_cpu_s",
        "sampler thread CPU per sample (s), wake-up and sleep included")
    fit("main_after_run_cpu_s_vs_samples", growth, ("samples",), "main_after_window_cpu_s",
        "main thread CPU after the sampler stopped (record, metrics, outputs, charts) vs samples")
    fit("parent_vm_hwm_bytes_vs_samples", growth, ("samples",), "vm_hwm_bytes",
        "memrel parent's peak RSS (VmHWM, last poll before exit) vs samples")
    fit("report_wall_s_vs_samples", reports, ("samples",), "wall_s",
        "`memrel report` (re-render every output from disk) wall vs samples")
    fit("report_cpu_s_vs_samples", reports, ("samples",), "self_cpu_s",
        "`memrel report` CPU vs samples")
    fit("added_wall_s_vs_samples", [dict(r, added_wall_s=r["wall_s"] - r["length_s"]) for r in growth],
        ("samples",), "added_wall_s", "memrel run wall minus the idle length vs samples")

    # 4. Threads at the smallest interval, per second of run.
    lo = min(args.intervals_ms)
    rs = [r for r in growth if r["interval_ms"] == lo and r["window_s"]]
    res["threads_at_min_interval"] = {
        "interval_ms": lo,
        "runs": len(rs),
        "sampler_pct_of_core": summary([100 * r["sampler_window_cpu_s"] / r["window_s"] for r in rs]),
        "main_pct_of_core": summary([100 * r["main_window_cpu_s"] / r["window_s"] for r in rs]),
        "other_threads_pct_of_core": summary([100 * r["other_window_cpu_s"] / r["window_s"] for r in rs]),
        "parent_pct_of_core_whole_run": summary([100 * r["self_cpu_s"] / r["wall_s"] for r in rs]),
        "sampler_us_per_sample": summary([1e6 * r["sampler_cpu_s"] / r["samples"] for r in rs
                                          if r["samples"]]),
    }

    # Targets.
    t = res["targets"]
    p10 = next((e for e in res["program"] if e["interval_ms"] == 10), None)
    if p10:
        m = p10["wall_overhead_pct"]["median"]
        spread = res["program_bare_spread_pct"]
        t["program_wall_overhead_at_10_ms_pct"] = {
            "target": "< 5 % of wall time at the default interval (10 ms)",
            "measured": p10["wall_overhead_pct"], "met": None if m is None else m < 5.0,
            "noise_pct": spread["wall"], "target_pct": 5.0,
            "note": "the program (§1), paired with its bare run; bare runs alone spread %s %% "
                    "(max−min over median)" % fmt_pct(spread["wall"])}
        t["program_work_slowdown_at_10_ms_pct"] = same_target(p10, "work_slowdown_pct", "own work time", spread["work"])
        t["program_best_cycle_slowdown_at_10_ms_pct"] = same_target(p10, "best_cycle_slowdown_pct", "fastest cycle", spread["best_cycle"])
        t["program_cpu_change_at_10_ms_pct"] = same_target(p10, "program_cpu_change_pct", "own CPU time", spread["cpu"])
        pc = p10["parent_cpu_pct_of_wall"]["median"]
        t["parent_cpu_at_10_ms_pct_of_wall"] = {
            "target": "< 5 %: memrel's own CPU over the program's wall (what it can take from the program on a saturated machine)",
            "measured": p10["parent_cpu_pct_of_wall"], "met": None if pc is None else pc < 5.0,
            "note": "CPU clock of the memrel process: not disturbed by wall-time noise"}
    g10 = [e for e in res["growth"] if e["interval_ms"] == 10]
    if g10:
        shortest = min(g10, key=lambda e: e["length_s"])
        m = shortest["wall_overhead_pct"]["median"]
        t["idle_run_wall_overhead_at_10_ms_pct"] = {
            "target": "< 5 %% of wall time at 10 ms (the shortest idle run, %g s)" % shortest["length_s"],
            "measured": shortest["wall_overhead_pct"], "met": None if m is None else m < 5.0,
            "note": "memrel run wall − the idle length (§3)"}
    s = res["threads_at_min_interval"]["sampler_pct_of_core"]
    if s["median"] is not None and lo == 1:
        t["sampler_thread_at_1_ms_pct_of_core"] = {
            "target": "sampler < 2 % of one core at 1 ms",
            "measured": s, "met": s["median"] < 2.0,
            "note": "the `memrel-sampler` thread alone, idle runs (§4)"}
        f = fits.get("parent_cpu_s_vs_length_at_1_ms")
        if f:
            slope_pct = 100 * f["coef"][1]
            t["whole_parent_at_1_ms_pct_of_core"] = {
                "target": "(the same 2 %, applied to the whole parent: sampler + orchestrator + other threads)",
                "measured": {"n": f["n"], "median": slope_pct, "min": None, "max": None,
                             "how": "slope of parent CPU over idle length"},
                "met": slope_pct < 2.0,
                "note": "slope of parent CPU over the idle length at 1 ms (§3 fits)"}
    return res


# ------------------------------------------------------------------- writing


def mib(b):
    return None if b is None else b / 1048576.0


def fmt_sum(s, scale=1.0, digits=3, unit=""):
    if not s or s.get("median") is None:
        return "–"
    med = s["median"] * scale
    if s.get("min") is None or s["n"] == 1:
        return "%.*f%s" % (digits, med, unit)
    return "%.*f (%.*f–%.*f)%s" % (digits, med, digits, s["min"] * scale, digits, s["max"] * scale, unit)


def same_target(p10, key, on_what, noise_pct):
    """The < 5 % target on one more of the program's measures at 10 ms
    (`key` in `p10`), with the spread of its bare runs alone."""
    median = p10[key]["median"]
    return {
        "target": "< 5 % (same target, on the program's %s)" % on_what,
        "measured": p10[key], "met": None if median is None else median < 5.0,
        "noise_pct": noise_pct, "target_pct": 5.0,
        "note": "bare runs alone spread %s %%" % fmt_pct(noise_pct)}


def fmt_pct(v):
    return "–" if v is None else "%.1f" % v


def fmt_n(s):
    return "–" if not s else str(s["n"])


def write_markdown(path, machine, settings, res, perf):
    L = []
    add = L.append
    add("# memrel: overhead of the harness")
    add("")
    add("Written by `benches/overhead/run.sh` (`overhead.py`); every number below comes from "
        "this run. Cells are **median (min–max) over the repetitions** (n in each table). "
        "CPU: the memrel process itself (\"parent\": its main/orchestrator thread, the sampler "
        "thread, the event reader and output drains), read as the process's CPU clock when it "
        "exited; the worker's or program's CPU is counted apart (wait4's total minus the parent).")
    add("")
    add("## Machine")
    add("")
    for k in ("date_utc", "uname", "cpu_model", "cpus", "memory_total", "os", "python", "memrel",
              "memrel_version", "memrel_sha256", "memrel_mtime_utc", "memrel_commit", "duration_s"):
        add("- %s: %s" % (k, machine.get(k)))
    add("- machine busy during the trials (all processes, cores of %d; from /proc/stat): "
        "fixed %s, program %s, growth %s"
        % (NCPU, fmt_sum(res["machine_busy_cores"]["fixed"], digits=2),
           fmt_sum(res["machine_busy_cores"]["program"], digits=2),
           fmt_sum(res["machine_busy_cores"]["growth"], digits=2)))
    add("- the driver's own CPU while it polled (runs > 0.5 s): %s %% of one core"
        % fmt_sum(res["driver_cpu_pct_of_wall"], digits=2))
    add("- settings: %s" % ", ".join("%s=%s" % kv for kv in sorted(settings.items())))
    add("")

    add("## Targets")
    add("")
    add("*met* compares the median with the target. Where the bare runs alone spread more "
        "than the target (max − min over their median), the verdict is marked not resolved: "
        "on this machine that measure cannot tell a pass from a miss.")
    add("")
    add("| target | measured | met | how |")
    add("|---|---|---|---|")
    for key, t in res["targets"].items():
        m = t["measured"]
        unit = " % of one core" if "core" in key else " %"
        verdict = {True: "yes", False: "**no**", None: "–"}[t["met"]]
        if t.get("noise_pct") is not None and t["noise_pct"] > t.get("target_pct", 5.0):
            verdict += " (not resolved: noise %.0f %% > the %g %% target)" % (
                t["noise_pct"], t.get("target_pct", 5.0))
        add("| %s | %s%s (n=%s) | %s | %s |" % (t["target"], fmt_sum(m, digits=2), unit, m.get("n"),
                                               verdict, t.get("note", "")))
    add("")

    add("## 1. The same program bare and under `memrel exec`")
    add("")
    add("`workload.py`: %s cycles of load %s MiB (bytearray, every page written) → forward "
        "(%s SHA-256 passes) → unload → `memrel.release()` → idle %s ms, each phase marked with "
        "memrel's module (a no-op bare). *work* = load + forward + unload as the program timed it; "
        "*elapsed* = the program's own first-to-last cycle; *wall* = spawn to exit of the "
        "outermost process (python bare, memrel measured). Overheads are paired with the bare run "
        "of the same repetition."
        % (settings["program_cycles"], settings["program_mib"], settings["program_passes"],
           settings["program_idle_ms"]))
    add("")
    add("| config | n | wall s | wall overhead % | work s | work slowdown % | best cycle ms "
        "| best cycle slowdown % | elapsed slowdown % "
        "| program CPU s | program CPU change % | parent CPU s | parent CPU % of wall | samples "
        "| machine busy, cores |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for e in res["program"]:
        add("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            e["config"], fmt_n(e["wall_s"]), fmt_sum(e["wall_s"]),
            fmt_sum(e.get("wall_overhead_pct"), digits=2), fmt_sum(e["workload_work_s"]),
            fmt_sum(e.get("work_slowdown_pct"), digits=2),
            fmt_sum(e["workload_work_min_cycle_s"], 1000, 1),
            fmt_sum(e.get("best_cycle_slowdown_pct"), digits=2),
            fmt_sum(e.get("elapsed_slowdown_pct"), digits=2),
            fmt_sum(e["program_cpu_s"]), fmt_sum(e.get("program_cpu_change_pct"), digits=2),
            fmt_sum(e["parent_cpu_s"]),
            fmt_sum(e["parent_cpu_pct_of_wall"], digits=2), fmt_sum(e["samples"], digits=0),
            fmt_sum(e["machine_busy_cores"], digits=2)))
    add("")
    sp = res["program_bare_spread_pct"]
    add("*best cycle* = the program's fastest cycle of work (load + forward + unload), the one "
        "least disturbed by other load. Noise floor: the bare runs alone spread %s %% in wall, "
        "%s %% in work, %s %% in best cycle and %s %% in CPU (max − min over the median); a "
        "difference smaller than that is not resolved here."
        % (fmt_pct(sp["wall"]), fmt_pct(sp["work"]), fmt_pct(sp["best_cycle"]), fmt_pct(sp["cpu"])))
    add("")

    add("## 2. Fixed cost per run")
    add("")
    add("*run* = the run's own `duration_s` (runs.json: from just before the worker's spawn to "
        "its reap, on memrel's clock); *run end after last edge* = `duration_s` − the last phase "
        "edge in events.csv: noticing that the worker exited (the run loop's poll tick), "
        "reaping it and stopping the sampler; "
        "*outside the run* = wall − `duration_s`: memrel's start-up, model preparation, and writing "
        "samples.csv, events.csv, runs.json, summary.json and timeline.png. `memrel report` "
        "re-renders those outputs from disk alone. Peak RSS: VmHWM of the process, last read "
        "before it exited.")
    add("")
    add("| what | n | wall ms | parent CPU ms | worker/program CPU ms | run ms | run end after last edge ms | outside the run ms | parent VmHWM MiB |")
    add("|---|---|---|---|---|---|---|---|---|")
    for e in res["fixed"]:
        add("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            e["config"], fmt_n(e["wall_s"]), fmt_sum(e["wall_s"], 1000, 1),
            fmt_sum(e["parent_cpu_s"], 1000, 1), fmt_sum(e["children_cpu_s"], 1000, 1),
            fmt_sum(e["run_duration_s"], 1000, 1), fmt_sum(e["end_lag_s"], 1000, 1),
            fmt_sum(e["outside_run_s"], 1000, 1),
            fmt_sum(e["vm_hwm_bytes"], 1 / 1048576.0, 1)))
    add("")
    add("| program | memrel exec adds to wall, ms (paired) | parent CPU ms |")
    add("|---|---|---|")
    for e in res["fixed_paired"]:
        add("| %s | %s | %s |" % (e["program"], fmt_sum(e["added_wall_s"], 1000, 1),
                                  fmt_sum(e["parent_cpu_s"], 1000, 1)))
    add("")

    add("## 3. Growth with run length and sample count")
    add("")
    add("`memrel run` of a fake scenario: one 1 MiB load and unload, then `idle L` (the worker "
        "sleeps L s). *added wall* = wall − L. Thread CPU from /proc/PID/task/TID/sched, polled "
        "every %s ms; *main in run* = the main (orchestrator) thread while the sampler thread "
        "was alive, *main after* = after it stopped (record, metrics, outputs, charts)."
        % settings["poll_ms"])
    add("")
    add("| interval | L s | n | samples | rate Hz | wall s | added wall s | added wall % "
        "| parent CPU ms | sampler ms | main in run ms | main after ms | worker CPU ms "
        "| run end after last edge ms | outside the run ms | parent VmHWM MiB | `memrel report` ms |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for e in res["growth"]:
        add("| %g ms | %g | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            e["interval_ms"], e["length_s"], fmt_n(e["wall_s"]), fmt_sum(e["samples"], digits=0),
            fmt_sum(e["sample_rate_hz"], digits=0), fmt_sum(e["wall_s"], digits=2),
            fmt_sum(e["added_wall_s"]), fmt_sum(e["wall_overhead_pct"], digits=2),
            fmt_sum(e["parent_cpu_s"], 1000, 1), fmt_sum(e["sampler_cpu_s"], 1000, 1),
            fmt_sum(e["main_window_cpu_s"], 1000, 1), fmt_sum(e["main_after_window_cpu_s"], 1000, 1),
            fmt_sum(e["worker_cpu_s"], 1000, 1), fmt_sum(e["end_lag_s"], 1000, 1),
            fmt_sum(e["outside_run_s"], 1000, 1),
            fmt_sum(e["vm_hwm_bytes"], 1 / 1048576.0, 2),
            fmt_sum(e["report_wall_s"], 1000, 1)))
    add("")
    add("Linear fits over every growth run (least squares; R² in brackets):")
    add("")
    add("| fit | intercept | slope(s) | R² | n |")
    add("|---|---|---|---|---|")
    for name, f in res["fits"].items():
        if not f:
            add("| %s | – | – | – | – |" % name)
            continue
        slopes = ", ".join("%s × %s" % (fmt_coef(c, f["y"], x), x) for c, x in zip(f["coef"][1:], f["x"]))
        add("| %s | %s | %s | %s | %d |" % (name, fmt_coef(f["coef"][0], f["y"], None), slopes,
                                             "–" if f["r2"] is None else "%.3f" % f["r2"], f["n"]))
    add("")

    th = res["threads_at_min_interval"]
    add("## 4. The sampler at %g ms, apart from the rest of the parent" % th["interval_ms"])
    add("")
    add("Per second of run, over the %d idle runs at %g ms (CPU of each thread while the sampler "
        "was alive, divided by that window):" % (th["runs"], th["interval_ms"]))
    add("")
    add("| thread | % of one core |")
    add("|---|---|")
    add("| sampler (`memrel-sampler`) | %s |" % fmt_sum(th["sampler_pct_of_core"], digits=2))
    add("| main (orchestrator run loop) | %s |" % fmt_sum(th["main_pct_of_core"], digits=2))
    add("| other threads (event reader, stdout/stderr drains) | %s |"
        % fmt_sum(th["other_threads_pct_of_core"], digits=2))
    add("| whole parent, start to exit (incl. start-up and outputs) | %s |"
        % fmt_sum(th["parent_pct_of_core_whole_run"], digits=2))
    add("")
    add("Sampler CPU per sample (wake-up, statm read, sleep): %s µs."
        % fmt_sum(th["sampler_us_per_sample"], digits=1))
    add("")
    if perf:
        add("## Where the parent's CPU goes (perf, one extra run)")
        add("")
        add("`perf record -F %d` of one %g s idle run at %g ms (not used for any number above; "
            "perf's own sampling perturbs it). Samples ≈ CPU × %d Hz."
            % (perf["frequency_hz"], perf["length_s"], perf["interval_ms"], perf["frequency_hz"]))
        add("")
        add("| thread | samples | ≈ CPU ms | in kernel % | top symbols (% of the thread's samples) |")
        add("|---|---|---|---|---|")
        for role, e in perf["roles"].items():
            top = "; ".join("`%s` %.0f" % (s["symbol"].replace("|", "\\|")[:70], s["pct_of_role"])
                            for s in e["top_symbols"][:6])
            add("| %s | %d | %.1f | %.0f | %s |" % (role, e["samples"], 1000 * e["cpu_s_estimate"],
                                                   e["kernel_pct"], top))
        add("")
    add("## Caveats")
    add("")
    for c in CAVEATS:
        add("- " + c)
    add("")
    with open(path, "w") as f:
        f.write("\n".join(L))


def fmt_coef(c, y, x):
    """A fit coefficient in a readable unit."""
    if y.endswith("_bytes"):
        return "%.1f B" % c if x else "%.2f MiB" % (c / 1048576.0)
    if x == "samples":
        return "%.2f µs" % (c * 1e6)
    if x == "length_s":
        return "%.3f %%" % (c * 100) if "cpu" in y else "%.5f s/s" % c
    return "%.1f ms" % (c * 1000)


CAVEATS = [
    "A 2-core VM shared with other work (another engineer's compiles): the machine-busy line "
    "above says how loaded it was. Medians over interleaved repetitions damp that; the ranges "
    "show it. Differences smaller than the ranges are not resolved.",
    "Parent CPU includes every thread of the memrel process, not only the sampler. Per-thread "
    "CPU comes from /proc/PID/task/TID/sched polled every --poll-ms: a thread's last few "
    "milliseconds, and any thread that lived between two polls, are missed "
    "(`unobserved_cpu_s` in trials.csv is the process clock minus what was seen).",
    "The run's window (sampler alive) and the peak RSS (VmHWM, last read before exit) are only "
    "as sharp as --poll-ms. wait4's ru_maxrss is the larger of memrel and its worker, so it is "
    "kept in trials.csv but not used as memrel's peak.",
    "Bare runs are polled exactly like memrel runs, so the driver's reads disturb both alike; "
    "its own CPU is in trials.csv (`driver_cpu_s`).",
    "The fake worker's idle step is a sleep: these runs measure memrel's cost beside a quiet "
    "worker. A worker that keeps both cores busy competes with the sampler for CPU; the "
    "program section shows that case only for a program whose work is one thread.",
]


def machine_info(args, started):
    def cmd(argv):
        try:
            return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  timeout=30).stdout.decode("utf-8", "replace").strip()
        except (OSError, subprocess.SubprocessError) as e:
            return "unavailable (%s)" % e

    cpu_model = "unknown"
    for line in (read_text("/proc/cpuinfo") or b"").decode("utf-8", "replace").splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    mem = status_line("/proc/meminfo", "MemTotal")
    os_name = "unknown"
    for line in (read_text("/etc/os-release") or b"").decode().splitlines():
        if line.startswith("PRETTY_NAME="):
            os_name = line.split("=", 1)[1].strip('"')
    h = hashlib.sha256()
    with open(args.memrel, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    st = os.stat(args.memrel)
    return {
        "date_utc": started.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "uname": " ".join(platform.uname()),
        "cpu_model": cpu_model,
        "cpus": NCPU,
        "memory_total": mem,
        "os": os_name,
        "python": sys.version.split()[0] + " (" + sys.executable + ")",
        "memrel": args.memrel,
        "memrel_version": cmd([args.memrel, "--version"]),
        "memrel_sha256": h.hexdigest(),
        "memrel_mtime_utc": datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc)
        .strftime("%Y-%m-%d %H:%M:%S UTC"),
        "memrel_commit": args.memrel_commit,
        "clk_tck": CLK_TCK,
    }


def status_line(path, key):
    for line in (read_text(path) or b"").decode().splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def write_csv(path, rows):
    keys = []
    for r in rows:
        for k in r:
            if k not in keys and not k.endswith("_path"):
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore", restval="")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("%.9g" % v if isinstance(v, float) else v) for k, v in r.items()
                        if k in keys})


# ---------------------------------------------------------------------- main


def floats(text):
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected numbers separated by commas, got %r" % text)
    if not vals:
        raise argparse.ArgumentTypeError("expected at least one number")
    return vals


def parse_args(argv):
    p = argparse.ArgumentParser(description="Measure memrel's own overhead (see the module docstring).")
    p.add_argument("--memrel", default=os.environ.get("MEMREL"),
                   help="the memrel binary (default: $MEMREL)")
    p.add_argument("--memrel-commit", default=os.environ.get("MEMREL_COMMIT", "not given"),
                   help="the commit the binary was built from, for the report (default: $MEMREL_COMMIT)")
    p.add_argument("--out", required=True, help="output directory (created; must be empty if it exists)")
    p.add_argument("--repeats", type=int, default=3, help="repetitions of the program and growth trials")
    p.add_argument("--fixed-repeats", type=int, default=10, help="repetitions of the fixed-cost trials")
    p.add_argument("--intervals-ms", type=floats, default=[10.0, 1.0], help="sampling intervals (ms)")
    p.add_argument("--lengths-s", type=floats, default=[5.0, 20.0, 60.0], help="idle run lengths (s)")
    p.add_argument("--program-repeats", type=int, default=6,
                   help="repetitions of the program trials (bare and each interval, interleaved)")
    p.add_argument("--program-cycles", type=int, default=10)
    p.add_argument("--program-mib", type=int, default=64)
    p.add_argument("--program-passes", type=int, default=2)
    p.add_argument("--program-idle-ms", type=float, default=200.0)
    p.add_argument("--poll-ms", type=float, default=10.0, help="how often the driver reads /proc")
    p.add_argument("--perf-length-s", type=float, default=10.0,
                   help="length of the extra run under perf record; 0: none")
    p.add_argument("--perf-hz", type=int, default=1999)
    p.add_argument("--keep-runs", action="store_true", help="keep memrel's result directories")
    p.add_argument("--workdir", help="scratch directory (default: a new temporary one, removed)")
    p.add_argument("--reanalyze", metavar="DIR",
                   help="run nothing: re-read DIR/trials.csv and DIR/overhead.json (an earlier run) "
                   "and rewrite DIR/overhead.md and DIR/overhead.json with this driver's analysis")
    p.add_argument("--quick", action="store_true",
                   help="a smoke test: 1 repetition, short runs (numbers not meaningful)")
    if "--reanalyze" in argv:
        a = p.parse_args(argv + ["--out", "-"])
        return a
    a = p.parse_args(argv)
    if a.quick:
        a.repeats, a.fixed_repeats, a.program_repeats = 1, 2, 1
        a.lengths_s, a.program_cycles, a.perf_length_s = [1.0, 2.0], 2, 1.0
    if not a.memrel:
        p.error("no memrel binary: set MEMREL=/path/to/memrel or pass --memrel")
    a.memrel = os.path.abspath(a.memrel)
    if not (os.path.isfile(a.memrel) and os.access(a.memrel, os.X_OK)):
        p.error("memrel binary %s does not exist or is not executable" % a.memrel)
    if min(a.repeats, a.fixed_repeats, a.program_repeats) < 1:
        p.error("--repeats, --fixed-repeats and --program-repeats must be at least 1")
    return a


def parse_cell(text):
    if text == "":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def reanalyze(d):
    """Rewrites overhead.md and overhead.json of an earlier run from its trials.csv."""
    trials = os.path.join(d, "trials.csv")
    saved = os.path.join(d, "overhead.json")
    for path in (trials, saved):
        if not os.path.isfile(path):
            raise DriverError("--reanalyze: %s is missing" % path)
    with open(trials, newline="") as f:
        rows = [{k: (v if k in ("section", "config", "label") else parse_cell(v))
                 for k, v in r.items()} for r in csv.DictReader(f)]
    with open(saved) as f:
        old = json.load(f)
    settings = old["settings"]
    args = argparse.Namespace(intervals_ms=settings["intervals_ms"], lengths_s=settings["lengths_s"])
    res = analyze(rows, args)
    with open(saved, "w") as f:
        json.dump({"schema": old.get("schema", "memrel-overhead/1"), "machine": old["machine"],
                   "settings": settings, "results": res, "perf": old.get("perf")}, f, indent=1)
    write_markdown(os.path.join(d, "overhead.md"), old["machine"], settings, res, old.get("perf"))
    sys.stderr.write("overhead: re-analyzed %s\n" % d)
    return 0


def main(argv):
    a = parse_args(argv)
    if a.reanalyze:
        return reanalyze(os.path.abspath(a.reanalyze))
    if not sys.platform.startswith("linux"):
        raise DriverError("Linux only (procfs, pidfd, waitid)")
    out = os.path.abspath(a.out)
    if os.path.isdir(out) and os.listdir(out):
        raise DriverError("output directory %s is not empty: pick another --out" % out)
    os.makedirs(out, exist_ok=True)
    sys.setswitchinterval(0.001)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    workdir = a.workdir or tempfile.mkdtemp(prefix="memrel-overhead-")
    os.makedirs(workdir, exist_ok=True)
    machine = machine_info(a, started)
    bench = Bench(a, workdir)
    cwd = os.getcwd()
    os.chdir(workdir)  # memrel writes nothing stray into the caller's directory
    try:
        mod_dir = bench.copy_module()
        bench.fixed()
        bench.program(mod_dir)
        bench.growth()
        perf = bench.perf_profile()
    finally:
        os.chdir(cwd)
        write_csv(os.path.join(out, "trials.csv"), bench.rows)
        if not a.workdir and not a.keep_runs:
            shutil.rmtree(workdir, ignore_errors=True)
    machine["duration_s"] = round(time.monotonic() - t0, 1)
    settings = {k: getattr(a, k) for k in (
        "repeats", "fixed_repeats", "program_repeats", "intervals_ms", "lengths_s", "program_cycles", "program_mib",
        "program_passes", "program_idle_ms", "poll_ms", "perf_length_s", "perf_hz", "quick")}
    res = analyze(bench.rows, a)
    with open(os.path.join(out, "overhead.json"), "w") as f:
        json.dump({"schema": "memrel-overhead/1", "machine": machine, "settings": settings,
                   "results": res, "perf": perf}, f, indent=1)
    write_markdown(os.path.join(out, "overhead.md"), machine, settings, res, perf)
    sys.stderr.write("overhead: wrote %s/{overhead.md,overhead.json,trials.csv} in %.0f s\n"
                     % (out, machine["duration_s"]))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except DriverError as e:
        sys.stderr.write("overhead: error: %s\n" % e)
        sys.exit(2)
