"""A tensor-parallel model's release ("after del llm, memory stays on some
GPUs and not others"): torchrun starts one process per GPU, NCCL joins them,
transformers shards a decoder over them (tp_plan="auto"), one forward runs,
then each rank deletes its shard and runs the strategy's release:

    drop                     del model; nothing else
    empty-cache              gc.collect(); torch.cuda.empty_cache()
    destroy-pg               gc.collect(); dist.destroy_process_group()
    destroy-pg-empty-cache   both: the process group, then the cache

Run under memrel with the whole process tree sampled (VRAM per process and
per GPU):

    memrel run --scenario scenarios/torch-gpu-tp.toml --tree

torchrun closes inherited descriptors, so rank 0 reaches memrel's channel
through torchrun's (the memrel module does it) and marks the phases; ranks
meet at a TCPStore barrier before each edge, which outlives the process
group. If transformers cannot shard the model (tp_plan), each rank keeps its
half of every weight matrix instead, as a column/row split does, and the
phase note says so.
"""

import datetime
import os
import time

import _common
from _common import memrel, torch

import torch.distributed as dist


class Barrier:
    """All ranks meet at a name; works before, between and after process groups."""

    def __init__(self, rank, world):
        self.world = world
        port = int(os.environ["MASTER_PORT"]) + 1
        self.store = dist.TCPStore(
            os.environ["MASTER_ADDR"],
            port,
            world,
            rank == 0,
            timeout=datetime.timedelta(seconds=120),
        )

    def meet(self, name):
        self.store.add(name, 1)
        deadline = time.monotonic() + 120
        while self.store.add(name, 0) < self.world:
            if time.monotonic() > deadline:
                raise RuntimeError("ranks did not meet at %r within 120 s" % name)
            time.sleep(0.002)


def shard_by_hand(path, rank, world, dev):
    """Each 2-D weight's rows rank/world, on this rank's GPU (no transformers TP)."""
    from safetensors import safe_open

    shards = {}
    for name in sorted(os.listdir(path)):
        if not name.endswith(".safetensors"):
            continue
        with safe_open(os.path.join(path, name), framework="pt") as f:
            for key in f.keys():
                t = f.get_tensor(key)
                if t.dim() == 2 and t.shape[0] % world == 0:
                    t = t.chunk(world, dim=0)[rank]
                shards[key] = t.to(dev)
    return shards


def tp_plan_auto():
    """from_pretrained's keywords for tp_plan="auto" (DistributedConfig where
    this transformers has it: the bare keyword is deprecated in 5.x)."""
    config = getattr(_common.transformers, "DistributedConfig", None)
    try:
        return {"distributed_config": config(tp_plan="auto")}
    except TypeError:  # None, or a DistributedConfig without tp_plan
        return {"tp_plan": "auto"}


def main():
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if world < 2:
        raise RuntimeError(
            "tensor_parallel.py shards a model over ranks: start it with torchrun "
            "--nproc-per-node 2 (scenarios/torch-gpu-tp.toml does)"
        )
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    barrier = Barrier(rank, world)
    (mid, path), *_ = _common.ordered_models()

    def group(generation):
        # A fresh key space per group: a group made again after
        # destroy_process_group must not read the last one's NCCL id.
        if not dist.is_initialized():
            dist.init_process_group(
                "nccl",
                store=dist.PrefixStore("group%d" % generation, barrier.store),
                rank=rank,
                world_size=world,
                device_id=dev,
            )

    with memrel.phase("warmup") as p:
        p.note = _common.warm_up([path])
        group(0)
        x = torch.ones(1024, device=dev)
        dist.all_reduce(x)
        p.note = "%d ranks, NCCL all_reduce of 4 KiB = %g on each; %s" % (world, x[0].item(), p.note)
        del x
        barrier.meet("warm")
    memrel.baseline(0.5)

    for cycle in range(1, memrel.cycles() + 1):
        barrier.meet("ready%d" % cycle)
        with memrel.phase("load", model=mid) as p:
            group(cycle)
            try:
                model = _common.transformers.AutoModelForCausalLM.from_pretrained(
                    path, dtype=torch.float32, **tp_plan_auto()
                )
                how = "transformers tp_plan=auto"
            except Exception as e:  # an older transformers, a model without a plan
                model = shard_by_hand(path, rank, world, dev)
                how = "by hand (tp_plan failed: %s)" % str(e).splitlines()[0][:200]
            torch.cuda.synchronize(dev)
            barrier.meet("loaded%d" % cycle)
            p.note = "sharded over %d GPUs %s; rank 0 holds %.1f MiB allocated" % (
                world,
                how,
                torch.cuda.memory_allocated(dev) / 1048576.0,
            )
        with memrel.phase("forward", model=mid) as p:
            if isinstance(model, dict):
                x = torch.ones(8, device=dev)
                dist.all_reduce(x)
                out = x
            else:
                ids = torch.randint(0, 1000, (1, 32), device=dev)
                with torch.no_grad():
                    out = model(input_ids=ids).logits
                del ids
            torch.cuda.synchronize(dev)
            barrier.meet("forward%d" % cycle)
            p.note = "one forward of 32 tokens, output %s" % (tuple(out.shape),)
        with memrel.phase("unload", model=mid):
            del model, out
            barrier.meet("unloaded%d" % cycle)
        barrier.meet("release%d" % cycle)
        memrel.release()
        barrier.meet("released%d" % cycle)
        memrel.settle(0.5)


if __name__ == "__main__":
    main()
