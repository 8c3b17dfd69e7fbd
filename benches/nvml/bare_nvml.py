"""The bare cost of the NVML calls memrel's VRAM sampler makes, from Python
(nvidia-ml-py's `pynvml`): the yardstick for issue 26's "one VRAM reading
<= a bare NVML call" (benches/nvml/run.sh prints it beside memrel's own
reading, `cargo bench --features cuda --bench nvml`).

Why a CUDA context: NVML's process list costs more with a process in it;
memrel's bench holds one (its own), so this script makes one too (the
driver API through ctypes, no torch), and so both lists hold one process.

  python3 benches/nvml/bare_nvml.py [--calls 20000] [--gpu 0]
  python3 benches/nvml/bare_nvml.py --pace-ms 5 --calls 1000
                                               # one call every 5 ms, as
                                               # memrel's sampler makes them

Why paced too: a call back to back with the one before finds the driver's
and the CPU's caches warm; a sampler's call comes after a sleep. pynvml's
process list is two NVML calls (the count, then the list) and a Python
list; memrel's sampler makes one call into a kept buffer. So the
process list is also timed as one call of NVML's C function into a buffer
made once (ctypes, through pynvml's handle on the library): the barest call
Python can make, and the same work as memrel's reading.
  python3 benches/nvml/bare_nvml.py --hold 5   # only hold a context 5 s
                                               # (the program memrel samples)
"""

import argparse
import ctypes
import statistics
import sys
import time


def cuda_context(gpu):
    """A CUDA context on `gpu` for this process, through libcuda."""
    cuda = ctypes.CDLL("libcuda.so.1")
    device = ctypes.c_int()
    ctx = ctypes.c_void_p()
    for name, call in (("cuInit", lambda: cuda.cuInit(0)),
                       ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(device), gpu)),
                       ("cuCtxCreate", lambda: cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, device))):
        rc = call()
        if rc != 0:
            raise SystemExit("bare_nvml.py: %s failed with CUDA error %d" % (name, rc))
    return cuda, ctx


def timed(fn, calls, pace_s=0.0):
    """Per-call µs of `calls` calls of fn (each timed alone), `pace_s`
    apart (start to start) when given."""
    out = []
    next_s = time.monotonic()
    for _ in range(calls):
        if pace_s:
            next_s += pace_s
            time.sleep(max(0.0, next_s - time.monotonic()))
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


class ProcessInfo(ctypes.Structure):
    """nvmlProcessInfo_t as nvmlDeviceGetComputeRunningProcesses_v3 fills it."""
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def one_call_list(pynvml, handle, room=64):
    """The process list in one C call into a buffer kept between calls."""
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses_v3")
    entries = (ProcessInfo * room)()
    count = ctypes.c_uint()

    def call():
        count.value = room
        rc = fn(handle, ctypes.byref(count), entries)
        if rc != 0:
            raise SystemExit("bare_nvml.py: nvmlDeviceGetComputeRunningProcesses_v3 returned %d" % rc)
        return count.value
    return call


def line(name, us):
    us_sorted = sorted(us)
    p99 = us_sorted[int(0.99 * (len(us_sorted) - 1))]
    return "%-44s median %.1f µs, mean %.1f µs, p99 %.1f µs over %d calls" % (
        name, statistics.median(us), statistics.fmean(us), p99, len(us))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--gpu", type=int, default=0, help="NVML and CUDA index (default 0)")
    p.add_argument("--pace-ms", type=float, default=0.0,
                   help="one call every this many ms (default: back to back)")
    p.add_argument("--hold", type=float, default=None,
                   help="only make a CUDA context and hold it this many seconds")
    args = p.parse_args(argv)
    if args.hold is not None:
        _keep = cuda_context(args.gpu)
        time.sleep(args.hold)
        return 0
    try:
        import pynvml
    except ImportError:
        print("bare_nvml.py: pynvml is missing: pip install nvidia-ml-py", file=sys.stderr)
        return 2
    _keep = cuda_context(args.gpu)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(args.gpu)
    listed = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    print("GPU %d: %s; %d compute process(es) listed" % (
        args.gpu, pynvml.nvmlDeviceGetName(handle), len(listed)))
    warm = max(100, args.calls // 20)
    timed(lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(handle), warm)
    pace_s = args.pace_ms / 1e3
    paced = " (every %g ms)" % args.pace_ms if pace_s else ""
    print(line("python nvmlDeviceGetComputeRunningProcesses" + paced,
               timed(lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(handle), args.calls, pace_s)))
    one_call = one_call_list(pynvml, handle)
    timed(one_call, warm)
    print(line("C nvmlDeviceGetComputeRunningProcesses_v3, one call" + paced,
               timed(one_call, args.calls, pace_s)))
    print(line("python nvmlDeviceGetMemoryInfo" + paced,
               timed(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle), args.calls, pace_s)))
    pynvml.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
