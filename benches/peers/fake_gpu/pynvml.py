"""A stand-in for pynvml (nvidia-ml-py) reading the fake torch's per-pid files: see torch/__init__.py."""

import os

_STATE = os.environ.get("FAKE_GPU_STATE", "/tmp/fake_gpu_state")


class _Process:
    def __init__(self, pid, used_bytes):
        self.pid = pid
        self.usedGpuMemory = used_bytes


def nvmlInit():
    pass


def nvmlDeviceGetCount():
    return 1


def nvmlDeviceGetHandleByIndex(index):
    return index


def nvmlDeviceGetComputeRunningProcesses(handle):
    out = []
    for name in os.listdir(_STATE) if os.path.isdir(_STATE) else []:
        if not name.isdigit() or not os.path.exists("/proc/" + name):
            continue
        try:
            with open(os.path.join(_STATE, name)) as f:
                out.append(_Process(int(name), int(f.read())))
        except (OSError, ValueError):
            pass  # being rewritten
    return out
