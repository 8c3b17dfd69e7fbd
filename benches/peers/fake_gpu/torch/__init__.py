"""A stand-in for torch, to smoke-test the peers' --gpu path on a machine without a GPU.

Why it exists: the GPU run happens on a lent machine with no network, so its
code paths (workload.py --gpu, the nvidia-smi / NVML pollers, the VRAM
judging and tables) are checked here first. Only what workload.py calls is
here. "VRAM" is a file per pid under $FAKE_GPU_STATE holding a 300 MiB
context plus the bytes of live tensors; the fake pynvml and nvidia-smi next
to this package read those files. Never on the path of a real run.
"""

import os

_STATE = os.environ.get("FAKE_GPU_STATE", "/tmp/fake_gpu_state")
_CONTEXT_BYTES = 300 << 20
uint8 = "uint8"
_used = [0]
_max = [0]


def _publish():
    os.makedirs(_STATE, exist_ok=True)
    path = os.path.join(_STATE, str(os.getpid()))
    with open(path + ".tmp", "w") as f:
        f.write(str(_CONTEXT_BYTES + _used[0]))
    os.replace(path + ".tmp", path)


class device:
    def __init__(self, kind, index=0):
        self.kind = kind
        self.index = index


class _Tensor:
    def __init__(self, n_bytes):
        self.n_bytes = n_bytes
        _used[0] += n_bytes
        _max[0] = max(_max[0], _used[0])
        _publish()

    def fill_(self, value):
        return self

    def __del__(self):
        _used[0] -= self.n_bytes
        _publish()


def empty(n_bytes, dtype=None, device=None):
    return _Tensor(n_bytes)


def zeros(n, device=None):
    _publish()  # the "context"


class cuda:
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def synchronize():
        pass

    @staticmethod
    def empty_cache():
        pass

    @staticmethod
    def max_memory_reserved():
        return _max[0]
