"""memrel and its peers, side by side on one workload, in one invocation.

Why it exists: memrel claims to watch a process's memory more cheaply, more
often and more faithfully than what people use today (a psutil loop, mprof,
psrecord, memray; on a GPU nvidia-smi, NVML, nvitop). This script makes that
claim checkable: every peer watches the same deterministic workload
(benches/peers/workload.py), one after another, several times in rotating
order, and the table says for each what one reading costs, the rate it really
holds, the CPU it burns, how much it slows or grows the process it watches,
whether it catches a 100 MiB spike held 20 ms, and how its peak compares with
the kernel's VmHWM. Every number in the output comes from this run, except
memrel's criterion figure for one reading, which is quoted (and labelled so)
from the README's "Benchmarks".

Run it through benches/peers/run.sh (it makes the virtual environment and
installs the peers); directly:

    python peers.py --memrel /path/to/memrel [--gpu] [--reps 5] [--out DIR]

How one run goes (the same for every peer, bare included):
  1. the workload starts, warms up, writes its pid to `ready` and waits for `go`;
  2. the monitor starts: attached by pid (psutil loop, psrecord, GPU pollers)
     or as the workload's launcher (mprof run, memrel exec, memray run);
  3. 0.3 s later the driver reads the monitor's CPU clock and writes `go`;
  4. when the workload has written its result it waits for `ack`: the driver
     reads the monitor's CPU clock again (the window's CPU), then writes `ack`;
  5. both exit; the monitor's readings are parsed into (time, bytes).

Readings are judged by value, not by clock (psrecord's clock starts at an
unknown moment): the spike counts as caught when, after the last reading of
the 256 MiB block (>= before-spike + 200 MiB) and a reading back near the
floor (< before-spike + 50 MiB), some reading reaches before-spike + 90 MiB,
where before-spike is the workload's own RSS (or NVML VRAM) right before it
allocated the spike.

Outputs in --out: peers.md (tables, the machine), peers.json (everything,
per run), runs.csv (one row per run and series), costs.json, readings/
(every run's readings as t_s,bytes), raw/ (each monitor's own files).
"""

import argparse
import csv
import datetime
import glob
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "workload.py")
POLL = os.path.join(HERE, "poll.py")
MIB = 1 << 20

PRE_GO_S = 0.3  # monitors settle into their loop before the work starts
RUN_TIMEOUT_S = 120.0
SPIKE_CAUGHT_BYTES = 90 * MIB  # the spike is 100 MiB
BLOCK_SEEN_BYTES = 200 * MIB  # the block is 256 MiB
FLOOR_BYTES = 50 * MIB

# Quoted, not measured here (building memrel's benches needs cargo): README
# "Benchmarks", `cargo bench --bench sampler` on the 2-core VM, and
# `cargo bench --features cuda --bench nvml` on an H100.
MEMREL_QUOTED = {
    "host": {"us": 1.57, "what": "one /proc/PID/statm read, fd kept open, pread (criterion, 2-core VM)"},
    "vram": {"us": 37.1, "what": "one NVML per-process reading (criterion, H100)"},
}


# --------------------------------------------------------------- the peers


class Peer:
    """One configuration to run: a monitor at one setting (or none: bare).

    kind: "bare" (no monitor), "attach" (started on the workload's pid),
    "launch" (starts the workload itself), "inprocess" (runs inside it).
    """

    def __init__(self, name, family, setting, kind, resources, command=None,
                 parse=None, started=None, env=None, poll_method=None):
        self.name = name
        self.family = family
        self.setting = setting
        self.kind = kind
        self.resources = resources
        self.command = command  # (ctx, run_dir, workload_cmd, pid) -> argv
        self.parse = parse  # (ctx, run_dir, result) -> [series]
        self.started = started  # (run_dir) -> bool: has the monitor begun reading?
        self.env = env or {}
        self.poll_method = poll_method


def poll_peer(name, family, setting, method, interval_s, resource):
    def command(ctx, rd, wl, pid):
        return [ctx.python, POLL, "run", "--method", method, "--pid", str(pid),
                "--interval-s", repr(interval_s), "--out", os.path.join(rd, "poll.csv"),
                "--started", os.path.join(rd, "poll.started")]

    def parse(ctx, rd, result):
        rows = read_csv(os.path.join(rd, "poll.csv"))
        readings = [(float(r["t_mono_s"]), int(r["bytes"])) for r in rows]
        return [series(resource, name, readings)]

    def started(rd):
        return os.path.exists(os.path.join(rd, "poll.started"))

    return Peer(name, family, setting, "attach", [resource], command, parse, started,
                poll_method=method)


def mprof_peer(name, interval_s):
    def command(ctx, rd, wl, pid):
        return [ctx.python, "-m", "mprof", "run", "--nopython", "-T", repr(interval_s),
                "-o", os.path.join(rd, "mprof.dat")] + wl

    def parse(ctx, rd, result):
        readings = []
        with open(os.path.join(rd, "mprof.dat")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0] == "MEM":
                    readings.append((float(parts[2]), int(float(parts[1]) * MIB)))
        return [series("host", name, readings)]

    return Peer(name, "mprof", "mprof run -T %g" % interval_s, "launch", ["host"], command, parse,
                poll_method="mprof")


def psrecord_peer(name, interval_s):
    def command(ctx, rd, wl, pid):
        argv = [ctx.python, "-m", "psrecord", str(pid), "--log", os.path.join(rd, "psrecord.csv"),
                "--log-format", "csv"]
        if interval_s is not None:
            argv += ["--interval", repr(interval_s)]
        return argv

    def parse(ctx, rd, result):
        rows = read_csv(os.path.join(rd, "psrecord.csv"))
        readings = [(float(r["elapsed_time"]), int(float(r["mem_real"]) * MIB)) for r in rows]
        return [series("host", name, readings)]

    def started(rd):
        try:
            with open(os.path.join(rd, "psrecord.csv")) as f:
                return len(f.readlines()) >= 2
        except FileNotFoundError:
            return False

    setting = "no --interval (as fast as it goes)" if interval_s is None else "--interval %g" % interval_s
    return Peer(name, "psrecord", setting, "attach", ["host"], command, parse, started,
                poll_method="psrecord")


def memray_peer(name, extra):
    def command(ctx, rd, wl, pid):
        # wl is [python, workload.py, args...]: memray runs the script in its own interpreter
        return [ctx.python, "-m", "memray", "run", "-q", "-f", "-o", os.path.join(rd, "memray.bin")] \
            + extra + wl[1:]

    def parse(ctx, rd, result):
        import memray

        reader = memray.FileReader(os.path.join(rd, "memray.bin"))
        snaps = [(s.time / 1000.0, s.rss) for s in reader.get_memory_snapshots()]
        spike_sizes = []
        n_records = 0
        for rec in reader.get_allocation_records():
            n_records += 1
            if 90 * MIB <= rec.size <= 110 * MIB:
                spike_sizes.append(rec.size)
        stats_json = os.path.join(rd, "memray-stats.json")
        p = subprocess.run([ctx.python, "-m", "memray", "stats", "--json", "-f", "-o", stats_json,
                            os.path.join(rd, "memray.bin")], capture_output=True, text=True)
        if p.returncode != 0:
            raise RunError("memray stats failed: %s" % (p.stderr or p.stdout)[-500:])
        with open(stats_json) as f:
            stats_peak = json.load(f)["metadata"]["peak_memory"]
        heap = series("host", name + " (tracked heap)", None)
        heap["peak_bytes"] = reader.metadata.peak_memory
        heap["memray_stats_peak_bytes"] = stats_peak
        heap["spike_caught"] = bool(spike_sizes)
        heap["spike_bytes"] = max(spike_sizes) if spike_sizes else None
        heap["note"] = ("tracked-heap peak: memray's high-water mark of the allocations it traced, "
                        "%d bytes in its FileReader metadata, %d in `memray stats --json` (%s); "
                        "%d allocation records; RSS snapshots: memray's own sampling thread" % (
                            reader.metadata.peak_memory, stats_peak,
                            "they agree" if stats_peak == reader.metadata.peak_memory else "THEY DIFFER",
                            n_records))
        reader.close()
        if os.environ.get("PEERS_KEEP_MEMRAY_BIN") != "1":
            # What the tables need is extracted; the capture can be hundreds of MiB.
            os.remove(os.path.join(rd, "memray.bin"))
        return [series("host", name + " (RSS snapshots)", snaps), heap]

    setting = "memray run " + " ".join(extra) if extra else "memray run (defaults)"
    return Peer(name, "memray", setting, "inprocess", ["host"], command, parse)


def memrel_peer(name, interval_ms, gpu, markers=True):
    def command(ctx, rd, wl, pid):
        argv = [ctx.memrel, "exec", "--name", "peers", "--out", os.path.join(rd, "memrel"),
                "--timeout-s", str(int(RUN_TIMEOUT_S)), "--python", wl[0]]
        if interval_ms is not None:
            argv += ["--interval-ms", str(interval_ms)]
        if gpu:
            argv += ["--device", "cuda"]
        return argv + ["--", "python3"] + wl[1:]

    def parse(ctx, rd, result):
        dirs = sorted(glob.glob(os.path.join(rd, "memrel", "peers", "*", "samples.csv")))
        if not dirs:
            raise RunError("memrel wrote no samples.csv under %s" % os.path.join(rd, "memrel"))
        rows = read_csv(dirs[-1])
        out = [series("host", name, [(float(r["t_s"]), int(r["rss_bytes"])) for r in rows])]
        if gpu:
            out.append(series("vram", name, [(float(r["t_s"]), int(r["vram_bytes"]))
                                             for r in rows if r["vram_bytes"] != ""]))
        with open(os.path.join(os.path.dirname(dirs[-1]), "runs.json")) as f:
            header = json.load(f)["header"]
        for s in out:
            s["interval_s"] = header.get("interval_s")
        return out

    setting = ("--interval-ms %d" % interval_ms) if interval_ms else "default interval"
    if gpu:
        setting += " --device cuda"
    if not markers:
        setting += ", no phase markers"
    return Peer(name, "memrel", setting, "launch", ["host", "vram"] if gpu else ["host"], command,
                parse, env={} if markers else {"PEERS_MARKERS": "0"})


def all_peers(gpu):
    peers = [
        Peer("bare", "bare", "no monitor", "bare", []),
        poll_peer("psutil-tight", "psutil", "psutil.Process(pid).memory_info().rss, no sleep",
                  "psutil", 0.0, "host"),
        poll_peer("psutil-1ms", "psutil", "the same, sleep 1 ms", "psutil", 0.001, "host"),
        mprof_peer("mprof-tight", 0.0),
        mprof_peer("mprof-1ms", 0.001),
        psrecord_peer("psrecord-tight", None),
        psrecord_peer("psrecord-1ms", 0.001),
        memray_peer("memray", []),
        memray_peer("memray-pyalloc", ["--trace-python-allocators"]),
        memrel_peer("memrel-1ms", 1, gpu),
        memrel_peer("memrel-10ms", None, gpu),
        memrel_peer("memrel-1ms-nomarkers", 1, gpu, markers=False),
    ]
    if gpu:
        peers += [
            poll_peer("nvidia-smi", "nvidia-smi", "one nvidia-smi --query-compute-apps per reading, no sleep",
                      "nvidia-smi", 0.0, "vram"),
            poll_peer("nvml-1ms", "nvml", "pynvml nvmlDeviceGetComputeRunningProcesses, sleep 1 ms",
                      "nvml", 0.001, "vram"),
            poll_peer("nvitop-1ms", "nvitop", "nvitop Device.processes(), sleep 1 ms",
                      "nvitop", 0.001, "vram"),
        ]
    return peers


# --------------------------------------------------------------- helpers


class RunError(Exception):
    pass


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def series(resource, source, readings):
    return {"resource": resource, "source": source, "readings": readings}


def cpu_clock_s(pid):
    """CPU seconds (all threads, ns precision) of a live process: its
    CLOCK_PROCESS_CPUTIME_ID, reached from outside (clock_getcpuclockid)."""
    return time.clock_gettime(((~pid) << 3) | 2)


def wait_for(path, what, proc=None, timeout_s=RUN_TIMEOUT_S, check=None):
    deadline = time.monotonic() + timeout_s
    while not (check() if check else os.path.exists(path)):
        if proc is not None and proc.poll() is not None:
            raise RunError("%s exited (status %s) before %s" % (proc.args[0], proc.returncode, what))
        if time.monotonic() > deadline:
            raise RunError("no %s within %.0f s" % (what, timeout_s))
        time.sleep(0.002)


def touch(path):
    with open(path, "w"):
        pass


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def tail(path, n=1500):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except FileNotFoundError:
        return ""


# --------------------------------------------------------------- one run


class Context:
    def __init__(self, args):
        self.python = args.python
        self.memrel = args.memrel
        self.gpu = args.gpu
        self.out = args.out


def run_once(ctx, peer, rep):
    rd = os.path.join(ctx.out, "raw", peer.name, "rep%d" % rep)
    os.makedirs(rd)
    f = {k: os.path.join(rd, k) for k in ("ready", "go", "ack", "result.json")}
    wl = [ctx.python, WORKLOAD, "--result", f["result.json"], "--ready", f["ready"],
          "--go", f["go"], "--ack", f["ack"]] + (["--gpu"] if ctx.gpu else [])
    env = dict(os.environ, **peer.env)
    out_log = open(os.path.join(rd, "stdout+stderr.txt"), "w")
    procs = {}
    t_launch = time.monotonic()

    def spawn(key, argv):
        with open(os.path.join(rd, key + ".argv"), "w") as a:
            a.write(shlex.join(argv) + "\n")
        procs[key] = subprocess.Popen(argv, env=env, stdout=out_log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, cwd=rd)
        return procs[key]

    try:
        if peer.kind in ("bare", "attach"):
            first = spawn("workload", wl)
        else:
            first = spawn("monitor", peer.command(ctx, rd, wl, None))
        wait_for(f["ready"], "the workload's ready file", first)
        with open(f["ready"]) as r:
            pid = json.load(r)["pid"]
        if peer.kind == "attach":
            spawn("monitor", peer.command(ctx, rd, wl, pid))
        mon = procs.get("monitor")
        if peer.started is not None:
            wait_for(None, "a first reading from %s" % peer.name, mon, check=lambda: peer.started(rd))
        time.sleep(PRE_GO_S)

        watch = mon.pid if (mon is not None and peer.kind in ("attach", "launch")) else None
        cpu0 = cpu_clock_s(watch) if watch else None
        t0 = time.monotonic()
        touch(f["go"])
        wait_for(f["result.json"], "the workload's result", first)
        t1 = time.monotonic()
        cpu1 = cpu_clock_s(watch) if watch else None
        workload_cpu_at_end_s = cpu_clock_s(pid)
        touch(f["ack"])

        rusage = {}
        for key in ("workload", "monitor"):
            p = procs.get(key)
            if p is None:
                continue
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while True:
                wpid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if wpid:
                    p.returncode = os.waitstatus_to_exitcode(status)
                    break
                if time.monotonic() > deadline:
                    raise RunError("%s did not exit within %.0f s after the workload finished" % (key, RUN_TIMEOUT_S))
                time.sleep(0.005)
            rusage[key] = ru.ru_utime + ru.ru_stime
            if p.returncode != 0:
                raise RunError("%s exited with status %d" % (key, p.returncode))
        t_exit = time.monotonic()
    except BaseException as e:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        out_log.close()
        if isinstance(e, RunError):
            raise RunError("%s rep %d: %s; its output (%s): %s" % (
                peer.name, rep, e, os.path.join(rd, "stdout+stderr.txt"),
                tail(os.path.join(rd, "stdout+stderr.txt"))))
        raise
    out_log.close()

    with open(f["result.json"]) as r:
        result = json.load(r)
    found = peer.parse(ctx, rd, result) if peer.parse else []

    run = {
        "peer": peer.name,
        "rep": rep,
        "workload": result,
        "window_s": t1 - t0,
        "invocation_wall_s": t_exit - t_launch,
        "workload_cpu_at_end_s": workload_cpu_at_end_s,
        "monitor_window_cpu_s": (cpu1 - cpu0) if watch else None,
        "monitor_total_cpu_s": None,
        "series": [],
    }
    if "monitor" in rusage and peer.kind == "attach":
        run["monitor_total_cpu_s"] = rusage["monitor"]
    elif "monitor" in rusage and peer.kind == "launch":
        # the launcher's rusage includes the workload it reaped
        run["monitor_total_cpu_s"] = rusage["monitor"] - workload_cpu_at_end_s
    for s in found:
        write_readings(ctx, peer, rep, s)
        run["series"].append(judge(s, result, run["window_s"]))
    return run


def write_readings(ctx, peer, rep, s):
    if not s["readings"]:
        return
    d = os.path.join(ctx.out, "readings", peer.name)
    os.makedirs(d, exist_ok=True)
    tag = s["source"].replace(" ", "_").replace("(", "").replace(")", "")
    with open(os.path.join(d, "rep%d-%s-%s.csv" % (rep, s["resource"], tag)), "w") as f:
        f.write("t_s,bytes\n")
        t0 = s["readings"][0][0]
        for t, v in s["readings"]:
            f.write("%.6f,%d\n" % (t - t0, v))


def judge(s, result, window_s):
    """Rate, peak, spike: what one series of readings shows about the run."""
    if s["resource"] == "host":
        truth_peak = result["host"]["vm_hwm_bytes"]
        before_spike = result["host"]["before_spike_rss_bytes"]
    else:
        truth_peak = result["vram"]["block_vram_bytes"]
        before_spike = result["vram"]["before_spike_vram_bytes"]
    readings = s.pop("readings")
    out = dict(s)
    out["truth_peak_bytes"] = truth_peak
    out["n_readings"] = len(readings) if readings is not None else None
    if readings:
        span = readings[-1][0] - readings[0][0]
        out["span_s"] = span
        out["rate_hz"] = (len(readings) - 1) / span if span > 0 else None
        out["peak_bytes"] = max(v for _, v in readings)
        # The work window on the monitor's own clock: its readings stop when the
        # workload exits, a few ms after the window ends, so take the last
        # window_s seconds of readings (clock-free, the same for every peer).
        win = [(t, v) for t, v in readings if t >= readings[-1][0] - window_s]
        out["readings_in_window"] = len(win)
        if len(win) >= 2 and win[-1][0] > win[0][0]:
            out["window_rate_hz"] = (len(win) - 1) / (win[-1][0] - win[0][0])
        out["longest_gap_s"] = max((b[0] - a[0] for a, b in zip(win, win[1:])), default=None)
        high = [i for i, (_, v) in enumerate(readings) if v >= before_spike + BLOCK_SEEN_BYTES]
        if not high:
            out["spike_caught"] = None
            out["spike_note"] = "no reading of the 256 MiB block: spike window unknown"
        else:
            rest = readings[high[-1] + 1:]
            floor = next((i for i, (_, v) in enumerate(rest) if v < before_spike + FLOOR_BYTES), None)
            window = rest[floor:] if floor is not None else []
            spike_max = max((v for _, v in window), default=None)
            out["spike_bytes"] = spike_max
            out["spike_caught"] = spike_max is not None and spike_max >= before_spike + SPIKE_CAUGHT_BYTES
            out["spike_above_before_bytes"] = (spike_max - before_spike) if spike_max is not None else None
    if out.get("peak_bytes") is not None:
        out["peak_error_pct"] = (out["peak_bytes"] - truth_peak) / truth_peak * 100
    return out


# --------------------------------------------------------------- costs


def measure_costs(ctx, methods):
    """Median µs per reading of each method, on an idle warmed-up workload."""
    d = os.path.join(ctx.out, "raw", "costs")
    os.makedirs(d)
    ready = os.path.join(d, "target.ready")
    argv = [ctx.python, WORKLOAD, "--idle-target", "--result", os.devnull, "--ready", ready]
    target = subprocess.Popen(argv + (["--gpu"] if ctx.gpu else []), stdin=subprocess.DEVNULL)
    out = {}
    try:
        wait_for(ready, "the cost target's ready file", target)
        with open(ready) as r:
            pid = json.load(r)["pid"]
        for m in methods:
            p = subprocess.run([ctx.python, POLL, "cost", "--method", m, "--pid", str(pid),
                                "--repeats", "5", "--min-time-s", "0.2"],
                               capture_output=True, text=True)
            if p.returncode != 0:
                out[m] = {"error": (p.stderr or p.stdout).strip()[-500:]}
                log("  cost %-13s failed: %s" % (m, out[m]["error"]))
                continue
            out[m] = json.loads(p.stdout)
            out[m]["cpu_median_us"] = median(out[m]["cpu_per_reading_us"])
            log("  cost %-13s %8.2f µs wall, %8.2f µs CPU (median of 5)" % (
                m, out[m]["median_us"], out[m]["cpu_median_us"]))
    finally:
        target.kill()
        target.wait()
    return out


# --------------------------------------------------------------- summary


def summarize(peers, runs, costs, gpu):
    bare = [r for r in runs if r["peer"] == "bare"]

    def wl(rs, key, sub=None):
        return median([(r["workload"][sub][key] if sub else r["workload"][key]) for r in rs])

    def timing(rs, keys):
        return median([sum(r["workload"]["timings_s"][k] for k in keys) for r in rs])

    host_touch = ["block_touch", "spike_touch"]

    def best(rs, key, keys):
        if keys is None:
            return min(r["workload"][key] for r in rs)
        return min(sum(r["workload"]["timings_s"][k] for k in keys) for r in rs)

    b = {
        "work_s": wl(bare, "work_s"),
        "busy_s": timing(bare, ["busy"]),
        "touch_s": timing(bare, host_touch),
        "wall_s": wl(bare, "wall_s"),
        "cpu_s": wl(bare, "cpu_s"),
        "vm_hwm_bytes": wl(bare, "vm_hwm_bytes", "host"),
        "invocation_wall_s": median([r["invocation_wall_s"] for r in bare]),
        "work_s_range": rng([r["workload"]["work_s"] for r in bare]),
        "busy_s_range": rng([r["workload"]["timings_s"]["busy"] for r in bare]),
    }
    for key, keys in (("work_s", None), ("busy_s", ["busy"]), ("touch_s", host_touch)):
        b[key + "_best"] = best(bare, key, keys)
    rows = []
    for p in peers:
        rs = [r for r in runs if r["peer"] == p.name]
        if not rs:
            continue
        row = {
            "peer": p.name, "family": p.family, "setting": p.setting, "kind": p.kind, "runs": len(rs),
            "work_s": wl(rs, "work_s"),
            "busy_s": timing(rs, ["busy"]),
            "touch_s": timing(rs, host_touch),
            "wall_s": wl(rs, "wall_s"),
            "workload_cpu_s": wl(rs, "cpu_s"),
            "vm_hwm_bytes": wl(rs, "vm_hwm_bytes", "host"),
            "invocation_wall_s": median([r["invocation_wall_s"] for r in rs]),
            "work_s_range": [min(r["workload"]["work_s"] for r in rs), max(r["workload"]["work_s"] for r in rs)],
            "spike_held_s": median([r["workload"]["timings_s"]["spike_held"] for r in rs]),
        }
        for key in ("work_s", "busy_s", "touch_s", "wall_s"):
            row[key.replace("_s", "") + "_vs_bare_pct"] = pct(row[key], b[key])
        # best of the runs: less touched by other processes than the median
        for key, keys in (("work_s", None), ("busy_s", ["busy"]), ("touch_s", host_touch)):
            row[key + "_best"] = best(rs, key, keys)
            row[key.replace("_s", "") + "_vs_bare_best_pct"] = pct(row[key + "_best"], b[key + "_best"])
        row["vm_hwm_vs_bare_bytes"] = row["vm_hwm_bytes"] - b["vm_hwm_bytes"]
        if p.kind in ("attach", "launch"):
            row["monitor_window_cpu_s"] = median([r["monitor_window_cpu_s"] for r in rs])
            row["monitor_cpu_pct"] = median([r["monitor_window_cpu_s"] / r["window_s"] * 100 for r in rs])
            row["monitor_total_cpu_s"] = median([r["monitor_total_cpu_s"] for r in rs])
        elif p.kind == "inprocess":
            # its CPU is the workload's: what it adds over a bare workload
            row["monitor_window_cpu_s"] = row["workload_cpu_s"] - b["cpu_s"]
            row["monitor_cpu_pct"] = median([
                (r["workload"]["cpu_s"] - b["cpu_s"]) / r["window_s"] * 100 for r in rs])
        if gpu:
            row["cuda_vs_bare_pct"] = pct(
                timing(rs, ["cuda_block_alloc", "cuda_spike_alloc"]),
                timing(bare, ["cuda_block_alloc", "cuda_spike_alloc"]))
        sources = []
        for s_name in dict.fromkeys(s["source"] + "|" + s["resource"] for r in rs for s in r["series"]):
            source, resource = s_name.split("|")
            ss = [s for r in rs for s in r["series"] if s["source"] == source and s["resource"] == resource]
            srow = {
                "source": source, "resource": resource,
                "rate_hz": median([s.get("rate_hz") for s in ss]),
                "rate_hz_range": rng([s.get("rate_hz") for s in ss]),
                "window_rate_hz": median([s.get("window_rate_hz") for s in ss]),
                "window_rate_hz_range": rng([s.get("window_rate_hz") for s in ss]),
                "longest_gap_s_median": median([s.get("longest_gap_s") for s in ss]),
                "longest_gap_s_max": max([s["longest_gap_s"] for s in ss if s.get("longest_gap_s")], default=None),
                "peak_bytes": median([s.get("peak_bytes") for s in ss]),
                "truth_peak_bytes": median([s["truth_peak_bytes"] for s in ss]),
                "peak_error_pct": median([s.get("peak_error_pct") for s in ss]),
                "peak_error_pct_range": rng([s.get("peak_error_pct") for s in ss]),
                "spike_caught": sum(1 for s in ss if s.get("spike_caught")),
                "spike_judged": sum(1 for s in ss if s.get("spike_caught") is not None),
                "spike_runs": len(ss),
                "spike_above_before_bytes": median([s.get("spike_above_before_bytes") for s in ss]),
                "interval_s": ss[0].get("interval_s"),
                "note": ss[0].get("note"),
            }
            if row.get("monitor_window_cpu_s") is not None and p.kind != "inprocess" and srow["rate_hz"]:
                srow["cpu_per_reading_us"] = median([
                    r["monitor_window_cpu_s"] / s["readings_in_window"] * 1e6
                    for r in rs for s in r["series"]
                    if s["source"] == source and s["resource"] == resource and s.get("readings_in_window")])
            sources.append(srow)
        row["series"] = sources
        if p.poll_method and p.poll_method in costs and "median_us" in costs[p.poll_method]:
            row["reading_us"] = costs[p.poll_method]["median_us"]
            row["reading_cpu_us"] = costs[p.poll_method]["cpu_median_us"]
        rows.append(row)
    return {"bare": b, "rows": rows}


def pct(x, base):
    if x is None or not base:
        return None
    return (x / base - 1) * 100


def rng(xs):
    xs = [x for x in xs if x is not None]
    return [min(xs), max(xs)] if xs else None


# --------------------------------------------------------------- output


def fmt(x, spec="%.2f", none="–"):
    return none if x is None else spec % x


def signed_pct(x):
    return "–" if x is None else "%+.1f %%" % x


def mib(x, spec="%.1f"):
    return "–" if x is None else spec % (x / MIB)


def comparisons(summary, gpu):
    """memrel (1 ms) as ratios to each peer: cost, rate, CPU."""
    rows = {r["peer"]: r for r in summary["rows"]}
    out = []
    for resource in (["host", "vram"] if gpu else ["host"]):
        me = rows.get("memrel-1ms")
        if me is None:
            continue
        mine = next((s for s in me["series"] if s["resource"] == resource), None)
        if mine is None:
            continue
        for r in summary["rows"]:
            if r["family"] in ("memrel", "bare", "memray"):
                continue
            theirs = next((s for s in r["series"] if s["resource"] == resource), None)
            if theirs is None:
                continue
            c = {"resource": resource, "peer": r["peer"]}
            if r.get("reading_us"):
                c["quoted_reading_cost_ratio"] = MEMREL_QUOTED[resource]["us"] / r["reading_us"]
            if mine.get("cpu_per_reading_us") and theirs.get("cpu_per_reading_us"):
                c["run_cpu_per_reading_ratio"] = mine["cpu_per_reading_us"] / theirs["cpu_per_reading_us"]
            if mine.get("window_rate_hz") and theirs.get("window_rate_hz"):
                c["rate_ratio"] = mine["window_rate_hz"] / theirs["window_rate_hz"]
            if me.get("monitor_cpu_pct") and r.get("monitor_cpu_pct"):
                c["cpu_ratio"] = me["monitor_cpu_pct"] / r["monitor_cpu_pct"]
            out.append(c)
    return out


def ratio_text(x):
    if x is None:
        return "–"
    return "1/%.0f" % (1 / x) if x < 0.5 else "%.2g×" % x


def markdown(meta, summary, costs, comps, gpu):
    b = summary["bare"]
    n = meta["reps"]
    L = []
    L.append("# memrel and its peers, one workload, one run\n")
    asked = meta.get("reps_asked", n)
    L.append("`%s` — %s, %d runs per peer in rotating order (after one bare warm-up run, not "
             "counted), %s.%s" % (meta["command"], meta["date"], n, "GPU mode" if gpu else "CPU mode",
                                  "" if asked == n else " **Cut short: %d of %d repetitions done.**" % (n, asked)))
    L.append("")
    L.append("The workload (benches/peers/workload.py): 0.3 s baseline; 200 000 small tuples built "
             "and dropped (`busy`); 256 MiB touched, held 0.3 s, freed; 0.3 s; a 100 MiB spike "
             "touched, held 20 ms, freed; 0.3 s tail%s. Bare (no monitor), median of %d: work "
             "%.3f s (range %.3f–%.3f s; busy %.3f s, range %.3f–%.3f s; page touching %.3f s), "
             "VmHWM %.1f MiB." % (
                 "; then the same block and spike as CUDA tensors" if gpu else "", n,
                 b["work_s"], b["work_s_range"][0], b["work_s_range"][1],
                 b["busy_s"], b["busy_s_range"][0], b["busy_s_range"][1],
                 b["touch_s"], b["vm_hwm_bytes"] / MIB))
    L.append("")

    L.append("## What watching costs\n")
    L.append("µs per reading: the method timed alone (last table); readings/s: what it recorded "
             "in the work window, median of %d (the window on the monitor's clock: its last "
             "readings over the window's length, as its readings stop when the workload exits); "
             "over its whole recording in brackets; longest gap: the longest time between two of "
             "its readings in the window (median over runs, and the worst run); monitor CPU: the monitor process's "
             "CPU clock over the work window (for memray, the workload's CPU above bare); CPU µs "
             "per reading in the run: that CPU over the readings in the window (sleeps, wake-ups, "
             "writing included); whole invocation: the monitor's wall time from launch to exit "
             "and its CPU without the workload's, start-up and its own reports included (bare: "
             "%.2f s).\n" % (n, b["invocation_wall_s"]))
    L.append("| peer | setting | µs per reading, wall (CPU) | readings/s in the window (whole) | longest gap ms (worst) "
             "| monitor CPU, % of a core | CPU µs per reading in the run | whole invocation s, CPU s |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in summary["rows"]:
        if r["family"] == "bare":
            continue
        for s in r["series"]:
            if r["family"] == "memrel":
                cost = "%.2f (quoted, criterion)" % MEMREL_QUOTED[s["resource"]]["us"]
            elif r["family"] == "memray":
                cost = "in-process, per allocation" if "heap" in s["source"] else "in-process thread"
            elif r.get("reading_us") is not None:
                cost = "%.1f (%.1f)" % (r["reading_us"], r["reading_cpu_us"])
            else:
                cost = "–"
            cpu = fmt(r.get("monitor_cpu_pct"), "%.1f")
            if r["family"] == "memray":
                cpu += " (added to the process)"
            setting = r["setting"]
            if s.get("interval_s"):
                setting += " (runs.json: interval_s %g)" % s["interval_s"]
            gap = "–"
            if s.get("longest_gap_s_median") is not None:
                gap = "%.1f (%.1f)" % (s["longest_gap_s_median"] * 1e3, s["longest_gap_s_max"] * 1e3)
            L.append("| %s%s | %s | %s | %s | %s | %s | %s | %s, %s |" % (
                s["source"], "" if s["resource"] == "host" else " [VRAM]", setting, cost,
                "%s (%s)" % (fmt(s["window_rate_hz"], "%.0f"), fmt(s["rate_hz"], "%.0f")),
                gap, cpu, fmt(s.get("cpu_per_reading_us"), "%.1f"),
                fmt(r["invocation_wall_s"]), fmt(r.get("monitor_total_cpu_s"))))
    L.append("")

    L.append("## What it does to the watched process\n")
    L.append("The workload's own timed sections (sleeps excluded): `work` is all of them, `busy` "
             "the small-object part (what an in-process tracer slows), `touch` the page faults of "
             "356 MiB. Each as the median of %d runs and as the best (fastest) run, against bare's "
             "median and best: other processes on this machine make single runs slower, never "
             "faster, so the best run is the least disturbed. VmHWM: the workload's own, at exit "
             "(median).\n" % n)
    cuda_head = " CUDA alloc, median |" if gpu else ""
    L.append("| peer | work s, median (best) | vs bare, median (best) | busy vs bare, median (best) "
             "| touch vs bare, median (best) |%s VmHWM MiB (vs bare) |" % cuda_head)
    L.append("|---|---:|---:|---:|---:|%s---:|" % ("---:|" if gpu else ""))
    for r in summary["rows"]:
        L.append("| %s | %.3f (%.3f) | %s (%s) | %s (%s) | %s (%s) |%s %.1f (%+.1f) |" % (
            r["peer"], r["work_s"], r["work_s_best"],
            signed_pct(r["work_vs_bare_pct"]), signed_pct(r["work_vs_bare_best_pct"]),
            signed_pct(r["busy_vs_bare_pct"]), signed_pct(r["busy_vs_bare_best_pct"]),
            signed_pct(r["touch_vs_bare_pct"]), signed_pct(r["touch_vs_bare_best_pct"]),
            (" %s |" % signed_pct(r.get("cuda_vs_bare_pct"))) if gpu else "",
            r["vm_hwm_bytes"] / MIB, r["vm_hwm_vs_bare_bytes"] / MIB))
    L.append("")

    L.append("## What it sees\n")
    L.append("Spike caught: runs in which, after the last reading of the 256 MiB block and a "
             "reading back near the floor, some reading reached before-spike + 90 MiB "
             "(before-spike: the workload's own reading just before it allocated the spike). "
             "Height seen: the highest reading in that window above before-spike (median). Peak: "
             "the highest reading (median) against the workload's own VmHWM%s.\n" % (
                 "; VRAM: against its own NVML reading while it held the 256 MiB tensor" if gpu else ""))
    L.append("| peer | spike caught | spike height seen, MiB | peak MiB | truth MiB | peak vs truth, median (range) |")
    L.append("|---|---:|---:|---:|---:|---:|")
    for r in summary["rows"]:
        for s in r["series"]:
            if s["spike_judged"]:
                caught = "%d/%d" % (s["spike_caught"], s["spike_judged"])
            elif s["peak_bytes"] is None:
                caught = "no readings"
            else:
                caught = "not judged"
            err = "–"
            if s["peak_error_pct"] is not None:
                lo, hi = s["peak_error_pct_range"]
                err = "%+.3f %% (%+.3f … %+.3f)" % (s["peak_error_pct"], lo, hi)
            L.append("| %s%s | %s | %s | %s | %s | %s |" % (
                s["source"], "" if s["resource"] == "host" else " [VRAM]", caught,
                mib(s["spike_above_before_bytes"]), mib(s["peak_bytes"], "%.2f"),
                mib(s["truth_peak_bytes"], "%.2f"), err))
    L.append("")
    notes = ["%s: %s" % (r["peer"], s["note"]) for r in summary["rows"] for s in r["series"] if s.get("note")]
    if notes:
        L.append("Notes (first run of each): " + " ".join("%s." % x for x in notes) + "\n")

    if comps:
        L.append("## memrel (1 ms) as ratios to each peer\n")
        L.append("Reading cost: memrel's quoted criterion figure over the peer's measured wall µs; "
                 "CPU per reading and CPU: both measured in this run (monitor CPU during the work "
                 "window); rate: readings per second held in the work window (medians).\n")
        L.append("| vs | resource | reading cost (quoted) | CPU per reading (run) | rate | monitor CPU |")
        L.append("|---|---|---:|---:|---:|---:|")
        for c in comps:
            L.append("| %s | %s | %s | %s | %s | %s |" % (
                c["peer"], c["resource"], ratio_text(c.get("quoted_reading_cost_ratio")),
                ratio_text(c.get("run_cpu_per_reading_ratio")), ratio_text(c.get("rate_ratio")),
                ratio_text(c.get("cpu_ratio"))))
        L.append("")
        for c in comps:
            L.append("- vs %s (%s): memrel's reading costs %s of its (quoted criterion figure); "
                     "in the run memrel's CPU per reading was %s its, and memrel held %s its rate "
                     "at %s its CPU." % (
                         c["peer"], c["resource"], ratio_text(c.get("quoted_reading_cost_ratio")),
                         ratio_text(c.get("run_cpu_per_reading_ratio")), ratio_text(c.get("rate_ratio")),
                         ratio_text(c.get("cpu_ratio"))))
        L.append("")

    L.append("## Cost of one reading (median of 5 timed loops, on an idle warmed-up workload)\n")
    L.append("| method | µs wall | µs CPU (this process) | readings per loop |")
    L.append("|---|---:|---:|---:|")
    for m, c in costs.items():
        if "error" in c:
            L.append("| %s | failed: %s | | |" % (m, c["error"].splitlines()[-1][:120]))
        else:
            L.append("| %s | %.2f | %.2f | %d |" % (m, c["median_us"], c["cpu_median_us"], c["readings_per_repeat"]))
    for res, q in MEMREL_QUOTED.items():
        if res == "host" or gpu:
            L.append("| memrel, %s | %.2f (quoted) | | |" % (q["what"], q["us"]))
    L.append("")

    L.append("## Machine\n")
    for k, v in meta["machine"].items():
        L.append("- %s: %s" % (k, v))
    L.append("")
    L.append("## Noise\n")
    L.append("While this ran (%.0f s), processes other than this benchmark used %.0f CPU-seconds, "
             "%.0f %% of the machine's %d CPUs (all CPU time in /proc/stat minus this benchmark's "
             "own and its children's). Load average before: %s; after: %s. %s" % (
                 meta["elapsed_s"], meta["others_cpu_s"],
                 meta["others_cpu_s"] / (meta["elapsed_s"] * meta["cpus"]) * 100, meta["cpus"],
                 meta["loadavg_before"], meta["loadavg_after"], meta.get("noise_note", "")))
    L.append("")
    return "\n".join(L) + "\n"


def machine_info(ctx):
    def first(path, key):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key):
                        return line.split(":", 1)[1].strip()
        except OSError:
            return None

    from importlib import metadata

    versions = {}
    for pkg in ("psutil", "memory_profiler", "psrecord", "memray", "nvitop", "nvidia-ml-py", "torch"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    try:
        memrel_version = subprocess.run([ctx.memrel, "--version"], capture_output=True, text=True).stdout.strip()
    except OSError as e:
        memrel_version = "unknown (%s)" % e
    info = {
        "uname -a": subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout.strip(),
        "CPU": "%s, %d logical CPUs" % (first("/proc/cpuinfo", "model name"), os.cpu_count()),
        "memory": first("/proc/meminfo", "MemTotal"),
        "python": "%s (%s)" % (platform.python_version(), sys.executable),
        "packages": ", ".join("%s %s" % kv for kv in versions.items()),
        "memrel": "%s (%s)" % (memrel_version, ctx.memrel),
    }
    if ctx.gpu:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True)
        info["GPU"] = p.stdout.strip() or p.stderr.strip()
    return info


def busy_cpu_s():
    """CPU-seconds all CPUs spent not idle since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def our_cpu_s():
    """This benchmark's CPU-seconds: the driver and every child it reaped."""
    import resource

    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def write_outputs(out, meta, peers, runs, costs, failures):
    """peers.json, runs.csv and peers.md from the runs: a pure function of
    what was measured, so `--render DIR` can redo it from DIR/peers.json."""
    summary = summarize(peers, runs, costs, meta["gpu"])
    comps = comparisons(summary, meta["gpu"])
    with open(os.path.join(out, "peers.json"), "w") as f:
        json.dump({"meta": meta, "summary": summary, "comparisons": comps, "costs": costs,
                   "runs": runs, "failures": failures}, f, indent=1)
    with open(os.path.join(out, "runs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["peer", "rep", "source", "resource", "work_s", "busy_s", "wall_s", "workload_cpu_s",
                    "vm_hwm_bytes", "window_s", "monitor_window_cpu_s", "monitor_total_cpu_s",
                    "invocation_wall_s", "n_readings", "rate_hz", "peak_bytes", "truth_peak_bytes",
                    "peak_error_pct", "spike_caught", "spike_above_before_bytes", "longest_gap_s",
                    "window_rate_hz", "readings_in_window"])
        for r in runs:
            for s in r["series"] or [{}]:
                w.writerow([r["peer"], r["rep"], s.get("source", ""), s.get("resource", ""),
                            r["workload"]["work_s"], r["workload"]["timings_s"]["busy"],
                            r["workload"]["wall_s"], r["workload"]["cpu_s"],
                            r["workload"]["host"]["vm_hwm_bytes"], r["window_s"],
                            r["monitor_window_cpu_s"], r["monitor_total_cpu_s"], r["invocation_wall_s"],
                            s.get("n_readings"), s.get("rate_hz"), s.get("peak_bytes"),
                            s.get("truth_peak_bytes"), s.get("peak_error_pct"), s.get("spike_caught"),
                            s.get("spike_above_before_bytes"), s.get("longest_gap_s"),
                            s.get("window_rate_hz"), s.get("readings_in_window")])
    md = markdown(meta, summary, costs, comps, meta["gpu"])
    if failures:
        md += "## Failed runs\n\n" + "\n".join("- %s rep %d: %s" % (
            x["peer"], x["rep"], x["error"].splitlines()[0][:300]) for x in failures) + "\n"
    with open(os.path.join(out, "peers.md"), "w") as f:
        f.write(md)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memrel", default=os.environ.get("MEMREL") or shutil.which("memrel"),
                    help="the memrel binary (default: $MEMREL, else memrel on PATH)")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter for the workload and the Python peers (default: this one)")
    ap.add_argument("--gpu", action="store_true", help="CUDA workload and the GPU peers")
    ap.add_argument("--reps", type=int, default=5, help="runs per peer (default 5)")
    ap.add_argument("--only", help="comma-separated peer names (bare is always run)")
    ap.add_argument("--out", help="output directory (default results/peers/<timestamp>)")
    ap.add_argument("--render", metavar="DIR",
                    help="only rewrite DIR's peers.md, peers.json and runs.csv from DIR/peers.json")
    args = ap.parse_args()

    if args.render:
        path = os.path.join(args.render, "peers.json")
        try:
            with open(path) as f:
                saved = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit("peers.py: cannot read %s (%s): --render needs a directory this script wrote" % (path, e))
        meta = saved["meta"]
        ran = {r["peer"] for r in saved["runs"]}
        peers = [p for p in all_peers(meta["gpu"]) if p.name in ran]
        write_outputs(args.render, meta, peers, saved["runs"], saved["costs"], saved["failures"])
        log("peers: rewrote %s" % os.path.join(args.render, "peers.md"))
        return

    if not args.memrel or not os.access(args.memrel, os.X_OK):
        sys.exit("peers.py: no memrel binary (%r): pass --memrel PATH or set MEMREL=/path/to/memrel"
                 % args.memrel)
    args.memrel = os.path.abspath(args.memrel)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    if args.out is None:
        args.out = os.path.join(HERE, "..", "..", "results", "peers", stamp)
    args.out = os.path.abspath(args.out)
    if os.path.exists(args.out) and os.listdir(args.out):
        sys.exit("peers.py: %s exists and is not empty: pass another --out" % args.out)
    os.makedirs(args.out, exist_ok=True)
    ctx = Context(args)

    peers = all_peers(args.gpu)
    if args.only:
        wanted = set(args.only.split(",")) | {"bare"}
        unknown = wanted - {p.name for p in peers}
        if unknown:
            sys.exit("peers.py: unknown peer(s) %s; known: %s" % (
                ", ".join(sorted(unknown)), ", ".join(p.name for p in peers)))
        peers = [p for p in peers if p.name in wanted]

    with open("/proc/loadavg") as f:
        load_before = f.read().strip()
    busy_before_s, ours_before_s = busy_cpu_s(), our_cpu_s()
    started = time.monotonic()
    log("peers: %d configurations × %d repetitions → %s" % (len(peers), args.reps, args.out))

    methods = ["psutil", "psutil-reuse", "mprof", "psrecord", "statm-pread"]
    if args.gpu:
        methods += ["nvidia-smi", "nvml", "nvitop"]
    costs = measure_costs(ctx, methods)
    with open(os.path.join(args.out, "costs.json"), "w") as f:
        json.dump(costs, f, indent=1)

    # One bare run first, not counted: the first run after start-up pays for
    # cold caches that no later run pays for.
    run_once(ctx, next(p for p in peers if p.name == "bare"), 0)
    machine = machine_info(ctx)

    def meta(reps_done):
        with open("/proc/loadavg") as f:
            load_after = f.read().strip()
        return {
            "command": os.environ.get("PEERS_INVOKED_AS")
            or " ".join(["peers.py"] + [shlex.quote(a) for a in sys.argv[1:]]),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "reps": reps_done,
            "reps_asked": args.reps,
            "gpu": args.gpu,
            "elapsed_s": time.monotonic() - started,
            "others_cpu_s": (busy_cpu_s() - busy_before_s) - (our_cpu_s() - ours_before_s),
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "machine": machine,
            "noise_note": os.environ.get("PEERS_NOISE_NOTE", ""),
            "memrel_quoted": MEMREL_QUOTED,
            "thresholds_bytes": {"spike_caught": SPIKE_CAUGHT_BYTES, "block_seen": BLOCK_SEEN_BYTES,
                                 "floor": FLOOR_BYTES},
        }

    runs = []
    failures = []
    for rep in range(1, args.reps + 1):
        k = (rep - 1) % len(peers)
        for peer in peers[k:] + peers[:k]:
            try:
                run = run_once(ctx, peer, rep)
            except RunError as e:
                failures.append({"peer": peer.name, "rep": rep, "error": str(e)})
                log("  %-22s rep %d FAILED: %s" % (peer.name, rep, str(e)[:400]))
                continue
            runs.append(run)
            s = run["series"][0] if run["series"] else {}
            log("  %-22s rep %d  work %.3f s  rate %s Hz  peak %s MiB  spike %s  mon CPU %s s" % (
                peer.name, rep, run["workload"]["work_s"], fmt(s.get("rate_hz"), "%.0f"),
                mib(s.get("peak_bytes")), s.get("spike_caught", "–"),
                fmt(run["monitor_window_cpu_s"], "%.3f")))
        # The tables so far after every repetition: a run cut short (a time
        # limit) still leaves complete tables of the repetitions it finished.
        write_outputs(args.out, meta(rep), peers, runs, costs, failures)

    log("peers: done in %.0f s; %d runs, %d failed → %s" % (
        time.monotonic() - started, len(runs), len(failures), os.path.join(args.out, "peers.md")))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
