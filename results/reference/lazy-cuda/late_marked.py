"""A marked PyTorch program whose CUDA context appears at its first load,
2 s after it starts: the baseline (before any CUDA call) is 0 MiB of VRAM,
so what stays after the release is the context and the caching allocator."""
import time

import memrel
import torch

time.sleep(2.0)
memrel.baseline(0.5)
for _ in range(memrel.cycles()):
    with memrel.phase("load", model="tensor-1g"):
        x = torch.empty(256 * 1024 * 1024, dtype=torch.float32, device="cuda")
        x.fill_(1.0)
        torch.cuda.synchronize()
    with memrel.phase("unload", model="tensor-1g"):
        del x
    memrel.release()
    memrel.settle(0.5)
