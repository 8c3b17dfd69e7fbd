"""Holds a `memrel drive --strategy … --repeat N` of the vLLM-shaped server
against nvidia-smi, and tabulates the host memory each strategy's wakes keep.

usage: check.py DRIVE_DIR SMI_CSV

DRIVE_DIR is the drive's results directory (STRATEGY/repeat-K/ with
requests.csv, processes.csv and server.log; sleep.csv at the top). SMI_CSV is
nvidia-smi --query-compute-apps=timestamp,pid,used_memory --format=csv,noheader,nounits
polled beside the whole drive.

memrel's clock zero of each run is taken from the server's own log: the
fixture prints "ANSWERED PATH UNIX_S" after each POST, so zero = UNIX_S minus
the request's response_t_s (the spread over a run's requests is printed).
For each request whose VRAM settled, every nvidia-smi poll while it stayed
settled (from the settled reading to the next request's send, 0.2 s in from
each end) is summed over that run's processes (processes.csv) and must equal
memrel's settled reading in whole MiB (nvidia-smi's unit).
"""

import csv
import datetime
import os
import statistics
import sys

MIB = 1 << 20
MARGIN_S = 0.2


def polls_of(smi_file):
    polls = {}
    for line in open(smi_file):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[2].isdigit():
            continue
        when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        polls.setdefault(when, {})[parts[1]] = int(parts[2])
    return polls


def clock_zero(run_dir, requests):
    answered = [line.split() for line in open(os.path.join(run_dir, "server.log")) if line.startswith("ANSWERED ")]
    posts = [r for r in requests if r["request"].startswith("POST ")]
    if len(answered) != len(posts):
        sys.exit(f"{run_dir}: {len(answered)} ANSWERED lines for {len(posts)} POST requests")
    zeros = [float(a[2]) - float(r["response_t_s"]) for a, r in zip(answered, posts)]
    return statistics.median(zeros), max(zeros) - min(zeros)


def check_run(run_dir, polls):
    requests = list(csv.DictReader(open(os.path.join(run_dir, "requests.csv"))))
    pids = {row["pid"] for row in csv.DictReader(open(os.path.join(run_dir, "processes.csv")))}
    t0, spread = clock_zero(run_dir, requests)
    print(f"{run_dir}: clock zero from the server's log (spread {spread * 1000:.1f} ms), pids {sorted(pids)}")
    times = sorted(polls)
    equal = total = 0
    asleep = []
    for i, r in enumerate(requests):
        if not r["vram_settled_bytes"]:
            continue
        settled_mib = int(r["vram_settled_bytes"]) / MIB
        answer = float(r["response_t_s"]) + float(r["until_s"] or 0)
        start = t0 + answer + float(r["settle_s"] or 0) + MARGIN_S
        end = t0 + float(requests[i + 1]["send_t_s"]) - MARGIN_S if i + 1 < len(requests) else start + 0.5
        inside = [t for t in times if start <= t <= end]
        sums = sorted({sum(v for p, v in polls[t].items() if p in pids) for t in inside})
        total += 1
        ok = sums == [round(settled_mib)]
        equal += ok
        if r["phase"] == "sleep":
            asleep.append(settled_mib)
        print(f"  request {r['index']} (cycle {r['cycle']}, {r['phase']}: {r['request']}): memrel settled {settled_mib:.1f} MiB;"
              f" nvidia-smi over {len(inside)} polls: {sums} MiB -> {'equal' if ok else 'DIFFERENT'}")
    wakes = [(round(int(r["host_held_first_bytes"] or 0) / MIB), round(int(r["shmem_held_first_bytes"] or 0) / MIB))
             for r in requests if r["phase"] == "wake"]
    return equal, total, asleep, wakes


def main():
    drive_dir, smi_file = sys.argv[1:3]
    polls = polls_of(smi_file)
    equal = total = 0
    asleep, wakes = {}, {}
    for strategy in sorted(os.listdir(drive_dir)):
        sdir = os.path.join(drive_dir, strategy)
        if not os.path.isdir(sdir):
            continue
        for repeat in sorted(os.listdir(sdir)):
            e, t, a, w = check_run(os.path.join(sdir, repeat), polls)
            equal, total = equal + e, total + t
            asleep.setdefault(strategy, []).extend(a)
            wakes.setdefault(strategy, []).extend(w)
    print(f"\n{equal} of {total} settled VRAM readings equal nvidia-smi's")
    print("\nVRAM held asleep (memrel's settled reading after each sleep, every cycle of every run), MiB:")
    for strategy, values in asleep.items():
        print(f"  {strategy}: {sorted(set(round(v) for v in values))}")
    print("\nhost memory the wake kept over the level before the same cycle's sleep (sleep.csv host_held_after_wake_bytes), MiB, by cycle:")
    rows = list(csv.DictReader(open(os.path.join(drive_dir, "sleep.csv"))))
    for strategy in dict.fromkeys(r["strategy"] for r in rows):
        mine = [r for r in rows if r["strategy"] == strategy]
        by_cycle = {}
        for r in mine:
            by_cycle.setdefault(r["cycle"], []).append(round(int(r["host_held_after_wake_bytes"]) / MIB))
        print(f"  {strategy}: " + "; ".join(f"cycle {c}: {v}" for c, v in sorted(by_cycle.items())))
    print("\nafter each wake, over the level before the first sleep (requests.csv host_held_first_bytes; shmem_held_first_bytes), MiB:")
    for strategy, runs in wakes.items():
        print(f"  {strategy}: host {[w[0] for w in runs]}; shared memory {[w[1] for w in runs]}")

main()
