"""Holds memrel's phase edges against nvidia-smi's per-process list, polled
beside the run every 50 ms: for each edge, every nvidia-smi poll in the
0.4 s before it (the phase's memory had settled by then and nothing acts
until memrel has read the edge) is summed per GPU and compared with the
edge's per-GPU VRAM in events.csv, in MiB (nvidia-smi's unit).

Usage: check.py EVENTS_CSV EDGE_TIMES SMI_CSV GPUS_CSV
  EDGE_TIMES: ranks.py's JSON list, or a server.py log (wall time first)."""

import csv
import datetime
import json
import sys
from collections import defaultdict

MIB = 1 << 20
WINDOW_S = (0.4, 0.02)


def edge_times(path):
    text = open(path).read()
    if text.lstrip().startswith("["):
        return [e["wall_s"] for e in json.loads(text)]
    return [float(line.split()[0]) for line in text.splitlines() if line.strip()]


def smi_polls(path, gpus):
    polls = defaultdict(lambda: defaultdict(int))
    for row in csv.reader(open(path)):
        if len(row) < 4:
            continue
        stamp, uuid, _pid, used = (c.strip() for c in row[:4])
        try:
            t = datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
            polls[t][gpus[uuid]] += int(used)
        except (ValueError, KeyError):
            continue
    return sorted(polls.items())


def main():
    events_csv, times, smi_csv, gpus_csv = sys.argv[1:5]
    gpus = {}
    for row in csv.reader(open(gpus_csv)):
        if len(row) >= 2:
            gpus[row[1].strip()] = int(row[0])
    events = list(csv.DictReader(open(events_csv)))
    walls = edge_times(times)
    polls = smi_polls(smi_csv, gpus)
    # Log-marked (attach): one edge pair per mark; the times are the marks'.
    if len(walls) != len(events):
        begins = [e for e in events if e["edge"] == "begin"]
        if len(begins) == len(walls):
            pairs = list(zip(begins, walls))
        else:
            sys.exit("%d edges in events.csv, %d times: cannot pair them" % (len(events), len(walls)))
    else:
        pairs = list(zip(events, walls))
    bad = 0
    print("phase     edge   gpu  memrel MiB  nvidia-smi MiB (polls in the 0.4 s before)  equal")
    for e, wall in pairs:
        cell = e.get("gpu_vram") or ""
        per_gpu = {}
        for entry in cell.split():
            g, b = entry.split(":")
            per_gpu[int(g)] = int(b)
        if not per_gpu and e.get("vram_bytes"):
            per_gpu[0] = int(e["vram_bytes"])
        window = [p for t, p in polls if wall - WINDOW_S[0] <= t <= wall - WINDOW_S[1]]
        for g in sorted(set(gpus.values())):
            mine = per_gpu.get(g, 0) / MIB
            seen = sorted({p.get(g, 0) for p in window})
            ok = bool(seen) and all(abs(mine - s) < 1 for s in seen)
            bad += not ok
            print("%-9s %-6s %3d %11.1f  %-45s %s" % (e["phase"], e["edge"], g, mine, seen, "yes" if ok else "NO"))
    print("%d of %d readings differ" % (bad, len(pairs) * len(set(gpus.values()))))


if __name__ == "__main__":
    main()
