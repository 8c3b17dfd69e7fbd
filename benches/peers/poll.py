"""The peers that are a few lines of Python, and the cost of one reading of each.

Why it exists: the article behind memrel measured host memory with a psutil
loop and VRAM with one `nvidia-smi` subprocess per reading; NVML from Python
and nvitop are what people reach for next. None of them ships a recorder, so
this file is the recorder, written the way their users write it, and nothing
cleverer: one reading, one timestamp, append, sleep. benches/peers/peers.py
runs it as a separate process (so its CPU can be read from /proc) and also
asks it for the cost of one reading of each method (`cost`).

    poll.py run  --method psutil --pid PID --interval-s 0.001 --out readings.csv
    poll.py cost --method psutil --pid PID --repeats 5 --min-time-s 0.2

Methods (each reads the memory of one process, PID):
    psutil       psutil.Process(pid).memory_info().rss (a new Process per reading,
                 as the article's loop and mprof do)
    psutil-reuse the same Process object every reading (for the cost table)
    mprof        memory_profiler._get_memory(pid, "psutil", timestamps=True):
                 exactly what one `mprof run` reading does
    psrecord     what one psrecord loop turn reads: status(), cpu_percent(),
                 memory_info() on one Process
    statm-pread  /proc/PID/statm through a descriptor kept open, re-read with
                 os.pread: memrel's method, in Python (for scale)
    nvidia-smi   `nvidia-smi --query-compute-apps=pid,used_memory
                 --format=csv,noheader,nounits`, this PID's line (MiB)
    nvml         pynvml.nvmlDeviceGetComputeRunningProcesses on every device
    nvitop       nvitop.Device.processes() on every device, .gpu_memory()

`run` writes `t_mono_s,bytes` (time.monotonic, the clock the workload stamps
its edges with) until the process is gone, keeping readings in memory so that
writing does not slow the loop. `cost` prints one JSON object.
"""

import argparse
import json
import os
import subprocess
import sys
import time

MIB = 1 << 20
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


class Gone(Exception):
    """The process being read has exited (or is a zombie)."""


def psutil_module():
    try:
        import psutil
    except ImportError as e:
        sys.exit("poll.py: psutil does not import (%s): run benches/peers/run.sh, which installs it" % e)
    return psutil


def reader(method, pid):
    """A function of no arguments that returns the process's bytes, or raises Gone."""
    if method in ("psutil", "psutil-reuse", "psrecord"):
        psutil = psutil_module()
        gone = (psutil.NoSuchProcess, psutil.ZombieProcess)
        if method == "psutil":

            def read():
                try:
                    return psutil.Process(pid).memory_info().rss
                except gone:
                    raise Gone()

            return read
        proc = psutil.Process(pid)
        if method == "psutil-reuse":

            def read():
                try:
                    return proc.memory_info().rss
                except gone:
                    raise Gone()

            return read

        def read():
            try:
                if proc.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                    raise Gone()
                proc.cpu_percent()
                return proc.memory_info().rss
            except gone:
                raise Gone()

        return read

    if method == "mprof":
        try:
            import memory_profiler
        except ImportError as e:
            sys.exit("poll.py: memory_profiler does not import (%s): run benches/peers/run.sh" % e)

        def read():
            mib, _ = memory_profiler._get_memory(pid, "psutil", timestamps=True)
            return int(mib * MIB)

        return read

    if method == "statm-pread":
        fd = os.open("/proc/%d/statm" % pid, os.O_RDONLY)

        def read():
            fields = os.pread(fd, 256, 0).split()
            if not fields:
                raise Gone()
            return int(fields[1]) * PAGE_BYTES

        return read

    if method == "nvidia-smi":
        cmd = [
            "nvidia-smi",
            "--query-compute-apps=pid,used_memory",
            "--format=csv,noheader,nounits",
        ]

        def read():
            try:
                text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            except FileNotFoundError:
                sys.exit("poll.py: nvidia-smi is not on PATH: this needs a machine with the NVIDIA driver")
            except subprocess.CalledProcessError as e:
                sys.exit("poll.py: nvidia-smi failed (exit %d): %s" % (e.returncode, e.stderr.strip()))
            total = 0
            for line in text.splitlines():
                parts = [p.strip() for p in line.split(",")]
                if len(parts) == 2 and parts[0] == str(pid) and parts[1].isdigit():
                    total += int(parts[1]) * MIB
            return total

        return read

    if method == "nvml":
        try:
            import pynvml
        except ImportError as e:
            sys.exit("poll.py: pynvml does not import (%s): pip install nvidia-ml-py" % e)
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]

        def read():
            total = 0
            for h in handles:
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                    if p.pid == pid and isinstance(p.usedGpuMemory, int):
                        total += p.usedGpuMemory
            return total

        return read

    if method == "nvitop":
        try:
            from nvitop import Device
        except ImportError as e:
            sys.exit("poll.py: nvitop does not import (%s): install it from the wheelhouse (run.sh --wheels)" % e)
        devices = Device.all()

        def read():
            total = 0
            for d in devices:
                p = d.processes().get(pid)
                if p is not None and isinstance(p.gpu_memory(), int):
                    total += p.gpu_memory()
            return total

        return read

    sys.exit("poll.py: unknown method %r (see the docstring for the list)" % method)


def alive(pid):
    """True while PID exists and is not a zombie (the driver reaps it late)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):  # gone before, or between open and read
        return False
    return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] not in (b"Z", b"X")


def run(args):
    read = reader(args.method, args.pid)
    times_s = []
    values = []
    # GPU methods return 0 while the process is not (or no longer) listed:
    # check that the process is alive every 100 readings instead.
    host = args.method in ("psutil", "psutil-reuse", "psrecord", "mprof", "statm-pread")
    interval_s = args.interval_s
    n = 0
    if args.started:
        with open(args.started, "w") as f:
            f.write(str(os.getpid()))
    while True:
        try:
            value = read()
        except Gone:
            break
        except Exception as e:  # psutil on a pid being reaped, NVML hiccups
            if not alive(args.pid):
                break
            sys.exit("poll.py: reading pid %d with %s failed: %s" % (args.pid, args.method, e))
        times_s.append(time.monotonic())
        values.append(value)
        n += 1
        if (not host and n % 100 == 0) or (host and value == 0):
            if not alive(args.pid):
                break
        if interval_s > 0:
            time.sleep(interval_s)
    with open(args.out, "w") as f:
        f.write("t_mono_s,bytes\n")
        for t, v in zip(times_s, values):
            f.write("%.6f,%d\n" % (t, v))


def cost(args):
    """Median over repeats of the wall time of one reading, in µs."""
    read = reader(args.method, args.pid)
    read()  # first call imports and opens lazily
    # Calibrate the count so that one repeat lasts about min_time_s.
    t = time.perf_counter()
    k = 0
    while time.perf_counter() - t < args.min_time_s / 10:
        read()
        k += 1
    per_s = (time.perf_counter() - t) / k
    n = max(3, int(args.min_time_s / per_s))
    per_reading_us = []
    cpu_per_reading_us = []
    for _ in range(args.repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(n):
            read()
        t1 = time.perf_counter()
        c1 = time.process_time()
        per_reading_us.append((t1 - t0) / n * 1e6)
        cpu_per_reading_us.append((c1 - c0) / n * 1e6)
    s = sorted(per_reading_us)
    print(
        json.dumps(
            {
                "method": args.method,
                "readings_per_repeat": n,
                "repeats": args.repeats,
                "per_reading_us": per_reading_us,
                "median_us": s[len(s) // 2],
                # own CPU only: a subprocess's (nvidia-smi) is not in it
                "cpu_per_reading_us": cpu_per_reading_us,
            }
        )
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="record readings until the process exits")
    r.add_argument("--method", required=True)
    r.add_argument("--pid", type=int, required=True)
    r.add_argument("--interval-s", type=float, default=0.0, help="sleep between readings (0: none)")
    r.add_argument("--out", required=True, help="CSV t_mono_s,bytes")
    r.add_argument("--started", help="file written once the reader is open")
    c = sub.add_parser("cost", help="time one reading (median of repeats)")
    c.add_argument("--method", required=True)
    c.add_argument("--pid", type=int, required=True)
    c.add_argument("--repeats", type=int, default=5)
    c.add_argument("--min-time-s", type=float, default=0.2)
    args = ap.parse_args()
    (run if args.command == "run" else cost)(args)


if __name__ == "__main__":
    main()
