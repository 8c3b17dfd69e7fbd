"""Which /proc/self/smaps mappings hold a PyTorch process's host memory on a
GPU machine (issue 49 item 1): the CUDA context, pinned host memory (in use,
freed to PyTorch's host cache, emptied), and reserved VRAM (no host side).

Run: python3 probe.py > probe.txt  (on the device machine; writes probe.json beside stdout's path if OUT is set)
"""
import json
import os
import re
import sys

MIB = 1 << 20


def mappings():
    """Rss and Pss in bytes per (perms' shared flag, path) from /proc/self/smaps."""
    out = {}
    key = None
    with open("/proc/self/smaps") as f:
        for line in f:
            m = re.match(r"^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$", line)
            if m:
                perms, path = m.group(1), m.group(2).strip()
                key = (perms[3], path or "[anon]")
                out.setdefault(key, {"rss": 0, "pss": 0, "n": 0})
                out[key]["n"] += 1
            elif line.startswith("Rss:") and key:
                out[key]["rss"] += int(line.split()[1]) * 1024
            elif line.startswith("Pss:") and key:
                out[key]["pss"] += int(line.split()[1]) * 1024
    return out


def status():
    s = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "RssAnon", "RssFile", "RssShmem")):
                k, v = line.split(":")
                s[k] = int(v.split()[0]) * 1024
    return s


def diff(before, after):
    rows = []
    for k in sorted(set(before) | set(after)):
        b = before.get(k, {"rss": 0, "n": 0})
        a = after.get(k, {"rss": 0, "n": 0})
        d = a["rss"] - b["rss"]
        if abs(d) >= MIB or (k[1].startswith("/dev/") and a != b):
            rows.append({"shared": k[0] == "s", "path": k[1], "delta_rss_mib": round(d / MIB, 1),
                         "rss_mib": round(a["rss"] / MIB, 1), "mappings": a["n"]})
    return rows


steps = []
prev_maps, prev_status = mappings(), status()


def step(name, **extra):
    global prev_maps, prev_status
    maps, st = mappings(), status()
    rec = {"step": name, "status_mib": {k: round(v / MIB, 1) for k, v in st.items()},
           "status_delta_mib": {k: round((st[k] - prev_status.get(k, 0)) / MIB, 1) for k in st},
           "changed": diff(prev_maps, maps), **extra}
    steps.append(rec)
    print("== %s: %s" % (name, rec["status_delta_mib"]))
    for r in rec["changed"]:
        print("   %s %-60s %+8.1f MiB (now %.1f MiB in %d mappings)" % (
            "s" if r["shared"] else "p", r["path"], r["delta_rss_mib"], r["rss_mib"], r["mappings"]))
    prev_maps, prev_status = maps, st


import torch  # noqa: E402
step("import torch")
torch.cuda.init()
x = torch.zeros(1, device="cuda")
torch.cuda.synchronize()
step("cuda context (one small tensor)")


def host_stats():
    try:
        s = torch.cuda.host_memory_stats()
        return {k: v for k, v in s.items() if "bytes" in k and ("current" in k or k.endswith("allocated_bytes.current"))}
    except Exception as e:  # noqa: BLE001
        return {"error": str(e)}


pinned = torch.empty(512 * MIB, dtype=torch.uint8, pin_memory=True)
pinned.fill_(1)
step("pinned 512 MiB in use", host_memory_stats=host_stats())
del pinned
step("pinned freed (PyTorch's host cache keeps it)", host_memory_stats=host_stats())
torch._C._host_emptyCache()
step("host cache emptied (torch._C._host_emptyCache)", host_memory_stats=host_stats())
v = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
v.fill_(1)
del v
torch.cuda.synchronize()
step("1 GiB VRAM reserved, not allocated", reserved=torch.cuda.memory_reserved(), allocated=torch.cuda.memory_allocated())
torch.cuda.empty_cache()
step("empty_cache", reserved=torch.cuda.memory_reserved())
out = os.environ.get("OUT")
if out:
    with open(os.path.join(out, "probe.json"), "w") as f:
        json.dump({"torch": torch.__version__, "steps": steps}, f, indent=1)
sys.stdout.flush()
