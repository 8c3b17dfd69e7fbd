"""Holds memrel drive's settled VRAM per request against nvidia-smi.

usage: check.py RESULTS_DIR T0_FILE SMI_CSV

RESULTS_DIR is a `memrel drive` results directory (requests.csv, processes.csv),
T0_FILE the wall time (time.time()) taken just before memrel started (its
clock's zero within tens of milliseconds), SMI_CSV nvidia-smi's
--query-compute-apps=timestamp,pid,used_memory poll (MiB). For each request
whose VRAM settled, every nvidia-smi poll while it stayed settled (from the
settled reading to the next request's send, 0.2 s in from each end) is summed
over the server's processes (processes.csv) and must equal memrel's settled
reading, in MiB. nvidia-smi prints no row while no process holds the GPU:
a settled window of at least 0.5 s (10 polls) without a row is read as
0 MiB. A window that is empty because the memory was still moving until the
next request (settle time as long as the settle window) is said so.
"""

import csv
import datetime
import os
import sys

MIB = 1 << 20
MARGIN_S = 0.2


def main():
    d, t0_file, smi_file = sys.argv[1:4]
    t0 = float(open(t0_file).read())
    requests = list(csv.DictReader(open(os.path.join(d, "requests.csv"))))
    pids = {}
    for row in csv.DictReader(open(os.path.join(d, "processes.csv"))):
        pids.setdefault(row["index"], set()).add(row["pid"])
    every = set().union(*pids.values()) if pids else set()
    polls = {}
    for line in open(smi_file):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[2].isdigit():
            continue
        when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        polls.setdefault(when, {})[parts[1]] = int(parts[2])
    times = sorted(polls)
    equal = total = 0
    for i, r in enumerate(requests):
        if not r["vram_settled_bytes"]:
            continue
        settled_mib = int(r["vram_settled_bytes"]) / MIB
        answer = float(r["response_t_s"]) + float(r["until_s"] or 0)
        start = t0 + answer + float(r["settle_s"] or 0) + MARGIN_S
        if i + 1 < len(requests):
            end = t0 + float(requests[i + 1]["send_t_s"]) - MARGIN_S
        else:
            end = t0 + answer + 2.0 - MARGIN_S
        tree = pids.get(r["index"], every)
        sums = sorted({sum(v for p, v in polls[t].items() if p in tree) for t in times if start <= t <= end})
        if end - start < 0.5:
            print("request %s (cycle %s, %s: %s): memrel settled %.0f MiB; still moving %.2f s after the answer, no settled window to check"
                  % (r["index"], r["cycle"], r["phase"], r["request"], settled_mib, float(r["settle_s"] or 0)))
            continue
        total += 1
        ok = sums == [round(settled_mib)]
        if not sums and settled_mib == 0:
            # nvidia-smi prints no row while no process holds the GPU.
            sums, ok = ["no process listed for %.1f s" % (end - start)], True
        equal += ok
        print(
            "request %s (cycle %s, %s: %s): memrel settled %.0f MiB; nvidia-smi over %d polls: %s MiB -> %s"
            % (r["index"], r["cycle"], r["phase"], r["request"], settled_mib,
               sum(1 for t in times if start <= t <= end), sums, "equal" if ok else "DIFFERENT")
        )
    print("%d of %d settled VRAM readings equal nvidia-smi's" % (equal, total))


main()
