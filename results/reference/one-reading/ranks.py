"""Two torchrun ranks that act right after every phase edge and differ per
GPU: rank 0 allocates 1 GiB on GPU 0 as each load begins and frees it with
empty_cache() as each unload begins; rank 1 allocates 512 MiB on GPU 1 and
keeps its cache. Rank 0 marks the phases (memrel's handshake: each edge
returns once memrel has read every GPU), then a barrier lets both ranks act.
Each edge's wall time goes to $EDGE_LOG (rank 0) for check.py."""

import json
import os
import time

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("gloo")  # barriers on the CPU: no VRAM of their own

import memrel  # noqa: E402  (rank 0 reports; the other ranks' module is silent)

torch.zeros(1, device="cuda")
torch.cuda.synchronize()
SIZE = (1 << 30) if rank == 0 else (512 << 20)
HOLD_S = 0.6
log = []


def edge(kind, phase):
    if rank == 0:
        (memrel.begin if kind == "begin" else memrel.end)(phase, model="blob")
        log.append({"phase": phase, "edge": kind, "wall_s": time.time()})
    dist.barrier()


time.sleep(HOLD_S)  # the contexts settle before the first edge
dist.barrier()
edge("begin", "baseline")
time.sleep(HOLD_S)
edge("end", "baseline")
for cycle in range(3):
    edge("begin", "load")
    x = torch.empty(SIZE, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    dist.barrier()
    time.sleep(HOLD_S)
    edge("end", "load")
    time.sleep(HOLD_S)
    edge("begin", "unload")
    del x
    if rank == 0:
        torch.cuda.empty_cache()
    torch.cuda.synchronize()
    dist.barrier()
    time.sleep(HOLD_S)
    edge("end", "unload")
    time.sleep(HOLD_S)

if rank == 0:
    with open(os.environ["EDGE_LOG"], "w") as f:
        json.dump(log, f)
dist.destroy_process_group()
