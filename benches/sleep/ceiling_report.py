"""Copy rates of sleep and wake against the bus's ceiling, from sleep.csv files
(memrel run --scenario cuda-sleep / torch-gpu-sleep): per strategy, the median
GiB/s each way and its fraction of the pinned ceiling measured in the same run,
and whether the target of issue 25 holds (offload-pinned at >= 80 % both ways).
A benchmark report, not a test: it prints numbers and exits 0 unless a file is
missing or holds no sleeps.

  python3 benches/sleep/ceiling_report.py results/reference/sleep/*/sleep.csv
"""

import csv
import statistics
import sys

TARGET = 0.80


def main(paths):
    if not paths:
        print(__doc__)
        return 2
    for path in paths:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            print("%s: no sleeps" % path, file=sys.stderr)
            return 2
        print(path)
        for strategy in dict.fromkeys(r["strategy"] for r in rows):
            mine = [r for r in rows if r["strategy"] == strategy]

            def med(key):
                values = [float(r[key]) for r in mine if r[key] != ""]
                return statistics.median(values) if values else None

            s, w = med("sleep_ceiling_fraction"), med("wake_ceiling_fraction")
            if s is None or w is None:
                print("  %-16s %d pairs, no copy rates (%s)" % (strategy, len(mine), mine[0]["mode"] or "-"))
                continue
            verdict = ""
            if strategy == "offload-pinned":
                verdict = "  both ways >= %d %%: %s" % (TARGET * 100, "yes" if min(s, w) >= TARGET else "no")
            print(
                "  %-16s %d pairs  sleep %.1f GiB/s (%.0f %% of %.1f)  wake %.1f GiB/s (%.0f %% of %.1f)%s"
                % (strategy, len(mine), med("sleep_gib_s"), s * 100, med("ceiling_d2h_gib_s"),
                   med("wake_gib_s"), w * 100, med("ceiling_h2d_gib_s"), verdict)
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
