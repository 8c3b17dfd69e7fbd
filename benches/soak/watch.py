"""Watches memrel's own process during a soak: its RSS, peak RSS and CPU
once a second, so the claim "memrel's memory stays flat over an hour at
1 ms" is a file anyone can read (results/reference/soak/parent.csv).

Usage: python3 benches/soak/watch.py -- memrel run --scenario soak --out DIR
It starts the command, samples it until it exits, writes parent.csv into
$WATCH_OUT (default: .), prints a summary line, and exits with its code.
"""

import csv
import os
import subprocess
import sys
import time

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime: fields 14 and 15 of stat, 12 and 13 after the name.
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        sys.exit("usage: watch.py -- COMMAND ARGS... (the memrel command to watch)")
    out_dir = os.environ.get("WATCH_OUT", ".")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "parent.csv")
    proc = subprocess.Popen(argv)
    start = time.monotonic()
    rows = []
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["t_s", "rss_bytes", "hwm_bytes", "cpu_s"])
        while proc.poll() is None:
            try:
                row = [
                    round(time.monotonic() - start, 3),
                    status_kib(proc.pid, "VmRSS") * 1024,
                    status_kib(proc.pid, "VmHWM") * 1024,
                    round(cpu_s(proc.pid), 2),
                ]
            except (OSError, ValueError, IndexError):
                break
            rows.append(row)
            out.writerow(row)
            f.flush()
            time.sleep(1.0)
    code = proc.wait()
    if rows:
        wall_s = rows[-1][0]
        after = [r for r in rows if r[0] >= 60.0] or rows
        mib = 1024 * 1024
        print(
            f"watch: {len(rows)} readings over {wall_s:.0f} s; memrel's RSS after the first minute "
            f"{min(r[1] for r in after) / mib:.1f}–{max(r[1] for r in after) / mib:.1f} MiB, "
            f"peak (VmHWM) {rows[-1][2] / mib:.1f} MiB, CPU {rows[-1][3]:.1f} s "
            f"({100 * rows[-1][3] / max(wall_s, 1e-9):.1f} % of one core)"
        )
    sys.exit(code)


if __name__ == "__main__":
    main()
