#!/usr/bin/env python3
"""Prints the README's per-strategy tables from the committed compare.json
files in this folder (nothing is typed by hand):

    python3 results/reference/allocators/table.py

Table 1: the cpu-trim workload (cpu-all) on the 2-core VM, with the release
curve of the idle and busy scenarios. Table 2: article-cpu on both hosts,
cpu-all and the idle and busy scenarios on the 16-core host.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024 * 1024


def rows(path):
    with open(os.path.join(HERE, path, "compare.json")) as f:
        c = json.load(f)
    return {r["strategy"]: r["summary"] for r in c["rows"]}


def host(summary):
    return next(r for r in summary["resources"] if r["resource"] == "host")


def sig(x):
    """Three significant digits, like memrel's own tables."""
    if x is None:
        return "–"
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}" if a >= 1 else f"{x:.2f}"


def mib(spread, key="median"):
    return None if spread is None else spread[key] / MIB


def ms(spread):
    return "–" if spread is None else sig(spread["median"] * 1e3)


def retained(summary, with_range=True):
    h = host(summary)
    r = h["retained_bytes"]
    text = sig(mib(r))
    if with_range and r["n"] > 1:
        text += f" ({sig(mib(r, 'min'))}–{sig(mib(r, 'max'))})"
    return text


def retaining(summary):
    h = host(summary)
    return f"{h['cycles_retaining']}/{h['cycles_total']}, {h['processes_retaining']}/{summary['runs']}"


def after_settle(summary):
    h = host(summary)
    t90 = h.get("release_t90_s")
    t90 = "no release" if t90 is None else f"t90 {ms(t90)} ms"
    return f"{sig(mib(h['retained_bytes']))} ({t90})"


def table1():
    trim = rows("vm/cpu-all")
    idle = rows("vm/cpu-idle-release")
    busy = rows("vm/cpu-busy-release")
    print(
        "| strategy | retained MiB, median (range over 3 processes) | cycles, processes retaining "
        "| t50 / t90 ms | idle 12 s: retained MiB (t90) | busy 12 s: retained MiB (t90) "
        "| release step ms | release → next ready ms | load ms | forward ms |"
    )
    print("|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for name, s in trim.items():
        h = host(s)
        print(
            f"| `{name}` | {retained(s)} | {retaining(s)} "
            f"| {ms(h.get('release_t50_s'))} / {ms(h.get('release_t90_s'))} "
            f"| {after_settle(idle[name])} | {after_settle(busy[name])} "
            f"| {ms(s.get('release_action_s'))} | {ms(s.get('ready_s'))} "
            f"| {ms(s.get('load_time_s'))} | {ms(s.get('forward_time_s'))} |"
        )


def table2():
    vm = rows("vm/article-cpu")
    big = rows("h200-host/article-cpu-compare")
    big_trim = rows("h200-host/cpu-all")
    vm_trim = rows("vm/cpu-all")
    big_idle = rows("h200-host/cpu-idle-release")
    big_busy = rows("h200-host/cpu-busy-release")
    print(
        "| strategy | article-cpu, 2-core VM: retained MiB (cycles, processes retaining) "
        "| article-cpu, 16-core host | cpu-all, 2-core VM | cpu-all, 16-core host "
        "| 16-core host, idle 12 s: retained MiB (t90) | 16-core host, busy 12 s "
        "| forward ms, VM / 16-core (cpu-all) |"
    )
    print("|:--|--:|--:|--:|--:|--:|--:|--:|")
    for name in vm:
        cells = [
            f"{retained(t[name], False)} ({retaining(t[name])})"
            for t in (vm, big, vm_trim, big_trim)
        ]
        cells += [after_settle(big_idle[name]), after_settle(big_busy[name])]
        fwd = f"{ms(vm_trim[name].get('forward_time_s'))} / {ms(big_trim[name].get('forward_time_s'))}"
        print(f"| `{name}` | " + " | ".join(cells) + f" | {fwd} |")


if __name__ == "__main__":
    table1()
    print()
    table2()
