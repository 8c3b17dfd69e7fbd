"""Draws parent.csv (written by watch.py) as parent.png: memrel's own RSS,
peak RSS and CPU share over a soak, so "flat" can be seen, not only read.

Usage: python3 benches/soak/plot.py DIR   (reads DIR/parent.csv, writes
DIR/parent.png; needs matplotlib: pip install matplotlib)
"""

import csv
import os
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot.py DIR (the directory with parent.csv)")
    out_dir = sys.argv[1]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot.py needs matplotlib: pip install matplotlib")
    with open(os.path.join(out_dir, "parent.csv")) as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    if len(rows) < 2:
        sys.exit(f"{out_dir}/parent.csv has fewer than two readings")
    mib = 1024 * 1024
    t_min = [r["t_s"] / 60 for r in rows]
    rss = [r["rss_bytes"] / mib for r in rows]
    hwm = [r["hwm_bytes"] / mib for r in rows]
    # CPU share over each minute-long window, % of one core.
    share = []
    for i, r in enumerate(rows):
        j = max(0, i - 60)
        dt = r["t_s"] - rows[j]["t_s"]
        share.append(100 * (r["cpu_s"] - rows[j]["cpu_s"]) / dt if dt > 0 else 0.0)
    fig, (a, b) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    a.plot(t_min, rss, label="RSS", color="#1f77b4")
    a.plot(t_min, hwm, label="peak RSS (VmHWM)", color="#d62728", linestyle="--")
    a.set_ylabel("memrel's own memory (MiB)")
    a.set_ylim(0, max(hwm) * 1.3)
    a.legend(loc="lower right")
    a.grid(alpha=0.3)
    b.plot(t_min, share, color="#2ca02c")
    b.set_ylabel("CPU, % of one core\n(last minute)")
    b.set_xlabel("minutes since memrel started")
    b.set_ylim(0, max(share) * 1.3 + 0.1)
    b.grid(alpha=0.3)
    fig.suptitle("memrel's parent process during the soak (sampling every 1 ms)")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "parent.png"), dpi=100)


if __name__ == "__main__":
    main()
