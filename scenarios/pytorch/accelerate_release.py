"""accelerate's release_memory ("Memory Management in PyTorch: how to free
memory in PyTorch fully"): a model, a batch and its output on the GPU, then

    model, batch, output = memrel.release(model, batch, output)

which under strategy accelerate-release does what accelerate.utils.
release_memory does: .to("cpu") on each object, gc.collect(),
torch.cuda.empty_cache(), and hands back None for each.

The claim to check: this frees almost everything but the CUDA context. Note
what the pattern itself implies: while the release runs, the caller still
holds `batch` and `output` (the CUDA tensors; .to("cpu") made copies), so
their blocks reach PyTorch's cache only at the assignment, after
empty_cache, and stay reserved. The model's .to("cpu") moves its weights in
place, so those blocks are free when empty_cache runs.

--tiny uses the seed's own TinyModel (Linear 100->200->10 on a 64x100 batch,
a few MiB: below what process-level VRAM shows clearly) instead of a
checkpoint.
"""

import argparse

import _common
from _common import memrel, torch


class TinyModel(torch.nn.Module):
    """The seed's model, as written there."""

    def __init__(self):
        super().__init__()
        self.linear1 = torch.nn.Linear(100, 200)
        self.activation = torch.nn.ReLU()
        self.linear2 = torch.nn.Linear(200, 10)
        self.softmax = torch.nn.Softmax(dim=0)

    def forward(self, x):
        return self.softmax(self.linear2(self.activation(self.linear1(x))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="the seed's TinyModel, no checkpoint")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=512, help="tokens per row of the batch (checkpoint models)")
    args = ap.parse_args()
    dev = _common.cuda_device()
    models = [("tiny", None)] if args.tiny else _common.ordered_models()

    with memrel.phase("warmup") as p:
        torch.zeros(1, device=dev)
        x = torch.randn(64, 64, device=dev)
        (x @ x).sum().item()
        del x
        p.note = "CUDA context on %s (%s) + one 64x64 matmul" % (dev, torch.cuda.get_device_name(dev))
        if not args.tiny:
            p.note += "; " + _common.warm_up([path for _, path in models])
    memrel.baseline(0.5)

    first = True
    for _ in range(memrel.cycles()):
        for mid, path in models:
            with memrel.phase("load", model=mid) as p:
                if path is None:
                    model = TinyModel().to(dev)
                    batch = torch.rand(64, 100, device=dev)
                else:
                    model = _common.load(path, dev=dev)
                    batch = _common.inputs(model, args.batch, args.seq, dev)
                torch.cuda.synchronize(dev)
                if first:
                    p.note = _common.versions()
                    first = False
            with memrel.phase("forward", model=mid) as p:
                with torch.inference_mode():
                    output = model(batch) if path is None else model(input_ids=batch).last_hidden_state
                torch.cuda.synchronize(dev)
                p.note = "output %s %s (%.1f MiB); allocated %.1f MiB, reserved %.1f MiB" % (
                    tuple(output.shape),
                    output.dtype,
                    output.numel() * output.element_size() / 1048576.0,
                    torch.cuda.memory_allocated(dev) / 1048576.0,
                    torch.cuda.memory_reserved(dev) / 1048576.0,
                )
            model, batch, output = memrel.release(model, batch, output)
            memrel.settle(0.3)


if __name__ == "__main__":
    main()
