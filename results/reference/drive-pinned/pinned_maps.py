"""Where PyTorch's pinned host memory and the CUDA context show in /proc.

Prints /proc/self/status's RssAnon/RssFile/RssShmem and the mappings of
/proc/self/smaps that hold 16 MiB or more (or map an NVIDIA device file) at
four points: before CUDA, after CUDA's context, with a 1 GiB pinned tensor,
after the tensor is freed (PyTorch's host allocator keeps it cached), and after
the host cache is emptied.
"""

import sys

import torch

MIB = 1 << 20


def status():
    keep = ("RssAnon", "RssFile", "RssShmem", "VmRSS")
    rows = [line.split() for line in open("/proc/self/status") if line.split(":")[0] in keep]
    return " ".join(f"{r[0]} {int(r[1]) // 1024} MiB" for r in rows)


def mappings():
    out, head = [], None
    for line in open("/proc/self/smaps"):
        first = line.split()[0]
        if not first.endswith(":"):
            parts = line.split()
            head = {"range": parts[0], "perms": parts[1], "path": " ".join(parts[5:])}
        elif first in ("Rss:", "Shared_Clean:", "Shared_Dirty:", "Private_Dirty:", "Locked:") and head is not None:
            head[first[:-1]] = int(line.split()[1]) * 1024
            if first == "Locked:":
                out.append(head)
    return out


def show(when):
    print(f"== {when}: {status()}")
    for m in mappings():
        if m["Rss"] >= 16 * MIB or "nvidia" in m["path"]:
            print(f"   {m['range']} {m['perms']} rss {m['Rss'] / MIB:8.1f} MiB shared {(m['Shared_Clean'] + m['Shared_Dirty']) / MIB:8.1f}"
                  f" private_dirty {m['Private_Dirty'] / MIB:8.1f} locked {m['Locked'] / MIB:8.1f} {m['path'] or '[anon]'}")


def empty_host_cache():
    for owner, name in ((torch.cuda, "empty_host_cache"), (torch.cuda.memory, "empty_host_cache"), (torch._C, "_host_emptyCache")):
        call = getattr(owner, name, None)
        if call is not None:
            call()
            return f"{owner.__name__}.{name}"
    sys.exit("no call empties the pinned host cache")


print("torch", torch.__version__, "host calls:", [n for n in dir(torch._C) if "host" in n.lower()],
      [n for n in dir(torch.cuda) if "host" in n.lower()])
show("before CUDA")
torch.cuda.init()
torch.ones(1, device="cuda")
show("CUDA context")
pinned = torch.ones(MIB * 1024 // 4, dtype=torch.float32, pin_memory=True)
show("a 1 GiB pinned tensor")
del pinned
show("freed (PyTorch's host cache keeps it)")
print("emptied by", empty_host_cache())
show("host cache emptied")
