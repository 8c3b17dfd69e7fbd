"""The workload every peer measures: known bytes at known moments, timed from inside.

Why it exists: to compare memory monitors side by side (benches/peers/peers.py)
they must all watch the same program doing the same thing, and the program
itself must say what really happened (how long its work took, its own RSS at
each step, the kernel's high-water mark VmHWM at exit), so that a monitor that
slows it, grows it or misses a spike can be caught by comparison with a bare
run. Standard library only on CPU; torch (and nvidia-ml-py for its own VRAM
reading) only with --gpu.

What it does after `--go` appears (the driver starts every monitor first):

    baseline    0.30 s asleep
    busy        200 000 small tuples built and dropped (what a tracing
                allocator slows); pymalloc may keep a few MiB of it
    block       256 MiB allocated and every page touched, held 0.30 s, freed
    gap         0.30 s asleep
    spike       100 MiB allocated and touched, held 20 ms, freed
    tail        0.30 s asleep
    --gpu:      the same block (256 MiB) and spike (100 MiB, 20 ms) as CUDA
                tensors, each freed with torch.cuda.empty_cache() so the
                driver sees VRAM go back; gaps of 0.30 s

It writes one JSON line to `--result` (timings in seconds, memory in bytes,
read from /proc/self), then waits for `--ack` so that monitors can be read
while it is still alive, and exits.

Phase markers: under `memrel exec` the memrel module is importable and the
phases are marked (load/unload around block and spike, busy, baseline);
elsewhere (`import memrel` fails) it runs bare. PEERS_MARKERS=0 turns the
markers off even under memrel. Marker calls sit outside the timed sections,
so `work_s` never includes them; `wall_s` does.
"""

import argparse
import contextlib
import json
import os
import resource
import sys
import time

MIB = 1 << 20
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
BLOCK_BYTES = 256 * MIB
SPIKE_BYTES = 100 * MIB
SPIKE_HOLD_S = 0.020
BASELINE_S = 0.30
HOLD_S = 0.30
GAP_S = 0.30
TAIL_S = 0.30
SMALL_OBJECTS = 200_000
GATE_TIMEOUT_S = 120.0

memrel = None
if os.environ.get("PEERS_MARKERS", "1") != "0":
    try:
        import memrel  # noqa: F811  (only present under `memrel exec`)
    except ImportError:
        memrel = None


def marker(name, model=None):
    """memrel.phase(...) under memrel, a no-op context otherwise."""
    if memrel is None:
        return contextlib.nullcontext()
    return memrel.phase(name, model=model)


def statm_rss_bytes():
    """This process's resident set, as an outside monitor reads it (statm)."""
    with open("/proc/self/statm", "rb") as f:
        fields = f.read().split()
    return int(fields[1]) * PAGE_BYTES


def status_bytes(key):
    """A `kB` field of /proc/self/status (VmHWM, VmRSS, …) in bytes."""
    with open("/proc/self/status", "rb") as f:
        for line in f:
            name, _, value = line.partition(b":")
            if name.decode() == key:
                return int(value.split()[0]) * 1024
    raise RuntimeError("no %s in /proc/self/status: is this Linux?" % key)


def cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def touched(n_bytes):
    """n_bytes of anonymous memory with every page written (bytearray alone
    is calloc'ed: its pages are not resident until written)."""
    buf = bytearray(n_bytes)
    buf[:: PAGE_BYTES] = b"\x01" * (n_bytes // PAGE_BYTES)
    return buf


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def wait_for(path, what):
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit(
                "workload: %s (%s) did not appear within %.0f s: is the driver "
                "(benches/peers/peers.py) still running?" % (what, path, GATE_TIMEOUT_S)
            )
        time.sleep(0.001)


class Gpu:
    """CUDA through torch, and this process's own VRAM through NVML."""

    def __init__(self):
        try:
            import torch
        except ImportError as e:
            sys.exit("workload --gpu: torch does not import (%s): run with a python that has torch" % e)
        try:
            import pynvml
        except ImportError as e:
            sys.exit(
                "workload --gpu: pynvml does not import (%s): pip install nvidia-ml-py" % e
            )
        if not torch.cuda.is_available():
            sys.exit("workload --gpu: torch.cuda.is_available() is False: no GPU or no driver")
        self.torch = torch
        self.nvml = pynvml
        self.device = torch.device("cuda", torch.cuda.current_device())
        torch.zeros(1, device=self.device)  # the CUDA context, before any baseline
        torch.cuda.synchronize()
        pynvml.nvmlInit()
        self.handles = [
            pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
        ]

    def own_vram_bytes(self):
        """This process's VRAM over all devices, as NVML lists it (0 if not listed)."""
        pid = os.getpid()
        total = 0
        for h in self.handles:
            for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(h):
                if p.pid == pid and isinstance(p.usedGpuMemory, int):
                    total += p.usedGpuMemory
        return total

    def tensor(self, n_bytes):
        t = self.torch.empty(n_bytes, dtype=self.torch.uint8, device=self.device)
        t.fill_(1)
        self.torch.cuda.synchronize()
        return t

    def release(self):
        self.torch.cuda.empty_cache()
        self.torch.cuda.synchronize()


def host_phases(out):
    timings = out["timings_s"]
    mem = out["host"]

    mem["baseline_rss_bytes"] = statm_rss_bytes()
    with marker("baseline"):
        time.sleep(BASELINE_S)

    with marker("busy"):
        t = time.perf_counter()
        objs = [(i, str(i)) for i in range(SMALL_OBJECTS)]
        del objs
        timings["busy"] = time.perf_counter() - t
    mem["after_busy_rss_bytes"] = statm_rss_bytes()

    with marker("load", model="block"):
        t = time.perf_counter()
        block = touched(BLOCK_BYTES)
        timings["block_touch"] = time.perf_counter() - t
    mem["block_rss_bytes"] = statm_rss_bytes()
    with marker("idle"):
        time.sleep(HOLD_S)
    with marker("unload", model="block"):
        t = time.perf_counter()
        del block
        timings["block_free"] = time.perf_counter() - t
    mem["after_block_rss_bytes"] = statm_rss_bytes()
    with marker("idle"):
        time.sleep(GAP_S)

    mem["before_spike_rss_bytes"] = statm_rss_bytes()
    with marker("load", model="spike"):
        t = time.perf_counter()
        spike = touched(SPIKE_BYTES)
        timings["spike_touch"] = time.perf_counter() - t
    mem["spike_rss_bytes"] = statm_rss_bytes()
    t = time.perf_counter()
    time.sleep(SPIKE_HOLD_S)
    timings["spike_held"] = time.perf_counter() - t
    with marker("unload", model="spike"):
        t = time.perf_counter()
        del spike
        timings["spike_free"] = time.perf_counter() - t
    mem["after_spike_rss_bytes"] = statm_rss_bytes()
    with marker("idle"):
        time.sleep(TAIL_S)


def gpu_phases(out, gpu):
    timings = out["timings_s"]
    mem = out["vram"]

    mem["baseline_vram_bytes"] = gpu.own_vram_bytes()
    with marker("load", model="cuda-block"):
        t = time.perf_counter()
        block = gpu.tensor(BLOCK_BYTES)
        timings["cuda_block_alloc"] = time.perf_counter() - t
    mem["block_vram_bytes"] = gpu.own_vram_bytes()
    with marker("idle"):
        time.sleep(HOLD_S)
    with marker("unload", model="cuda-block"):
        t = time.perf_counter()
        del block
        gpu.release()
        timings["cuda_block_free"] = time.perf_counter() - t
    mem["after_block_vram_bytes"] = gpu.own_vram_bytes()
    with marker("idle"):
        time.sleep(GAP_S)

    mem["before_spike_vram_bytes"] = gpu.own_vram_bytes()
    with marker("load", model="cuda-spike"):
        t = time.perf_counter()
        spike = gpu.tensor(SPIKE_BYTES)
        timings["cuda_spike_alloc"] = time.perf_counter() - t
    # No NVML read here: it would lengthen the 20 ms hold.
    t = time.perf_counter()
    time.sleep(SPIKE_HOLD_S)
    timings["cuda_spike_held"] = time.perf_counter() - t
    with marker("unload", model="cuda-spike"):
        t = time.perf_counter()
        del spike
        gpu.release()
        timings["cuda_spike_free"] = time.perf_counter() - t
    mem["after_spike_vram_bytes"] = gpu.own_vram_bytes()
    with marker("idle"):
        time.sleep(TAIL_S)
    mem["torch_max_reserved_bytes"] = gpu.torch.cuda.max_memory_reserved()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--result", required=True, help="file for the one-line JSON result")
    ap.add_argument("--ready", help="file written (with this pid) once warmed up")
    ap.add_argument("--go", help="wait for this file before the baseline")
    ap.add_argument("--ack", help="after the result, wait for this file before exiting")
    ap.add_argument("--gpu", action="store_true", help="also allocate on CUDA (needs torch)")
    ap.add_argument(
        "--idle-target",
        action="store_true",
        help="warm up, write --ready, then sleep until killed (a process to read in cost benchmarks)",
    )
    args = ap.parse_args()

    gpu = Gpu() if args.gpu else None  # CUDA context and NVML before "ready"
    touched(4 * MIB)  # warm the allocator and the touch loop itself

    if args.ready:
        write_atomically(args.ready, json.dumps({"pid": os.getpid(), "mono_s": time.monotonic()}))
    if args.idle_target:
        while True:
            time.sleep(3600)
    if args.go:
        wait_for(args.go, "the go file")

    out = {
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "markers": memrel is not None,
        "gpu": gpu is not None,
        "timings_s": {},
        "host": {},
        "vram": {},
    }
    cpu0 = cpu_s()
    mono0 = time.monotonic()
    wall0 = time.perf_counter()

    host_phases(out)
    if gpu is not None:
        gpu_phases(out, gpu)

    out["wall_s"] = time.perf_counter() - wall0
    out["cpu_s"] = cpu_s() - cpu0
    out["go_mono_s"] = mono0
    out["go_unix_s"] = time.time() - (time.monotonic() - mono0)
    out["end_mono_s"] = time.monotonic()
    t = out["timings_s"]
    out["work_s"] = sum(v for k, v in t.items() if not k.endswith("_held"))
    out["host"]["vm_hwm_bytes"] = status_bytes("VmHWM")
    out["host"]["vm_rss_end_bytes"] = status_bytes("VmRSS")

    write_atomically(args.result, json.dumps(out) + "\n")
    if args.ack:
        wait_for(args.ack, "the ack file")


if __name__ == "__main__":
    main()
