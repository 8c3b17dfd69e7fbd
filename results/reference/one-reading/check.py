"""Holds memrel's phase edges against nvidia-smi's per-process list, polled
beside the run every 50 ms: for each edge, nvidia-smi's last poll before it
(summed per GPU over the processes it lists) is compared with the edge's
per-GPU VRAM in events.csv, in MiB (nvidia-smi's unit). The polls of the
0.4 s before the edge are listed beside it (where they differ, memory was
still moving then). A poll with no process on a GPU reads 0 there.

Usage: check.py EVENTS_CSV EDGE_TIMES SMI_CSV GPUS_CSV
  EDGE_TIMES: ranks.py's JSON list, or a server.py log (wall time first)."""

import csv
import datetime
import json
import re
import sys
from collections import defaultdict

MIB = 1 << 20
WINDOW_S = (0.4, 0.0)


def edge_times(path):
    text = open(path).read()
    if text.lstrip().startswith("["):
        return [e["wall_s"] for e in json.loads(text)]
    return [float(line.split()[0]) for line in text.splitlines() if line.strip()]


def smi_polls(path, gpus):
    """nvidia-smi's polls, each {gpu: MiB summed over its processes}: the
    rows of one poll carry stamps a few ms apart, so a poll is a run of rows
    less than 20 ms from the one before (the polls are 50 ms apart)."""
    rows = []
    for row in csv.reader(open(path)):
        if len(row) < 4:
            continue
        stamp, uuid, _pid, used = (c.strip() for c in row[:4])
        try:
            t = datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
            rows.append((t, gpus[uuid], int(used)))
        except (ValueError, KeyError):
            continue
    rows.sort()
    polls = []
    for t, gpu, used in rows:
        if not polls or t - polls[-1][2] > 0.020:
            polls.append([t, defaultdict(int), t])
        polls[-1][1][gpu] += used
        polls[-1][2] = t
    return [(start, dict(per_gpu)) for start, per_gpu, _ in polls]


def main():
    events_csv, times, smi_csv, gpus_csv = sys.argv[1:5]
    gpus = {}
    for row in csv.reader(open(gpus_csv)):
        if len(row) >= 2:
            gpus[row[1].strip()] = int(row[0])
    events = list(csv.DictReader(open(events_csv)))
    walls = edge_times(times)
    polls = smi_polls(smi_csv, gpus)
    if len(walls) == len(events):
        pairs = list(zip(events, walls))
    else:
        # Log-marked (attach): each edge's note quotes the log line that
        # marked it, whose first word is its wall time; an edge that no
        # line marked (the close at the end) is left out.
        pairs = []
        for e in events:
            stamp = re.search(r'log line "+([0-9]+[.][0-9]+) ', e.get("note") or "")
            if stamp:
                pairs.append((e, float(stamp.group(1))))
    bad = 0
    print("phase     edge   gpu  memrel MiB  nvidia-smi MiB  (its polls of the 0.4 s before)  equal")
    for e, wall in pairs:
        cell = e.get("gpu_vram") or ""
        per_gpu = {}
        for entry in cell.split():
            g, b = entry.split(":")
            per_gpu[int(g)] = int(b)
        if not per_gpu and e.get("vram_bytes"):
            per_gpu[0] = int(e["vram_bytes"])
        window = [p for t, p in polls if wall - WINDOW_S[0] <= t <= wall]
        last = window[-1] if window else None
        for g in sorted(set(gpus.values())):
            mine = per_gpu.get(g, 0) / MIB
            seen = sorted({p.get(g, 0) for p in window})
            at = None if last is None else last.get(g, 0)
            ok = at is not None and abs(mine - at) < 1
            bad += not ok
            print("%-9s %-6s %3d %11.1f  %14s  %-32s %s"
                  % (e["phase"], e["edge"], g, mine, at, seen, "yes" if ok else "NO"))
    print("%d of %d readings differ" % (bad, len(pairs) * len(set(gpus.values()))))


if __name__ == "__main__":
    main()
