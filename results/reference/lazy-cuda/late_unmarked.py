"""A PyTorch program with no phase markers that touches CUDA 2 s after it
starts: 1 GiB on the GPU for 1 s, freed, the cache emptied, then 1 s more."""
import time

import torch

time.sleep(2.0)
x = torch.empty(256 * 1024 * 1024, dtype=torch.float32, device="cuda")
x.fill_(1.0)
torch.cuda.synchronize()
time.sleep(1.0)
del x
torch.cuda.empty_cache()
time.sleep(1.0)
