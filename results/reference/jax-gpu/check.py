"""Holds a memrel run's VRAM at its edges against nvidia-smi.

usage: check.py RESULTS_DIR T0_FILE SMI_CSV

RESULTS_DIR is a `memrel run` results directory (runs.json, events.csv),
T0_FILE the wall time (time.time()) taken just before memrel started (its
clock's zero within tens of milliseconds; `memrel run` starts a clock per
run, so each run's is aligned on the data: its first sample with VRAM
against nvidia-smi's first poll listing its process, within one poll), SMI_CSV
nvidia-smi's --query-compute-apps=timestamp,pid,used_memory poll every 50 ms
(MiB). Each edge's VRAM is compared with nvidia-smi's last poll before it
for the run's worker process (absent from the list: 0), and with the poll
after it.
"""

import csv
import gzip
import datetime
import json
import os
import sys

MIB = 1 << 20


def main():
    d, t0_file, smi_file = sys.argv[1:4]
    t0 = float(open(t0_file).read())
    runs = json.load(open(os.path.join(d, "runs.json")))["runs"]
    pid_of = {str(r["run"]): str(r["pid"]) for r in runs}
    polls = []
    for line in open(smi_file):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[2].isdigit():
            if "No running processes found" in line and polls:
                # No timestamp on that line: it belongs just after the last poll.
                polls.append((polls[-1][0] + 0.05, {}))
            continue
        when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        if not polls or polls[-1][0] != when:
            polls.append((when, {}))
        polls[-1][1][parts[1]] = int(parts[2])
    samples = os.path.join(d, "samples.csv")
    rows = csv.DictReader(open(samples) if os.path.exists(samples) else gzip.open(samples + ".gz", "rt"))
    first_seen = {}
    for r in rows:
        if r.get("vram_bytes") and int(r["vram_bytes"]) > 0:
            first_seen.setdefault(r["run"], float(r["t_s"]))
    offset_of = {}
    for run, t in first_seen.items():
        listed = [when for when, procs in polls if procs.get(pid_of.get(run), 0) > 0]
        if listed:
            offset_of[run] = listed[0] - t
            print("run %s: its clock's zero at %+.3f s from t0" % (run, offset_of[run] - t0))
    equal = total = 0
    for e in csv.DictReader(open(os.path.join(d, "events.csv"))):
        if not e.get("vram_bytes"):
            continue
        if e["run"] not in offset_of:
            continue
        t = offset_of[e["run"]] + float(e["t_s"])
        pid = pid_of.get(e["run"])
        before = [p for p in polls if p[0] <= t]
        after = [p for p in polls if p[0] > t]
        # No row before: nvidia-smi listed no process yet (0 MiB).
        smi_before = before[-1][1].get(pid, 0) if before else 0
        smi_after = after[0][1].get(pid, 0) if after else None
        mine = int(e["vram_bytes"]) / MIB
        ok = smi_before is not None and round(mine) == smi_before
        total += 1
        equal += ok
        print("run %s %-8s %-12s %-5s memrel %7.0f MiB, nvidia-smi before %s, after %s -> %s" % (
            e["run"], e["strategy"], e["phase"], e["edge"], mine, smi_before, smi_after,
            "equal" if ok else "DIFFERENT"))
    print("%d of %d edges equal nvidia-smi's last poll before them" % (equal, total))


main()
