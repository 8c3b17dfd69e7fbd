"""Asynchronous kernels and freeing ("Why isn't PyTorch freeing CUDA VRAM after
calculations?"): the seed says VRAM used by tensors of a matrix product is
released, "and thus visible to nvidia-smi", only after torch.cuda.synchronize().

Each cycle allocates two square fp32 matrices (load), queues a chain of matrix
products without waiting for them (forward: the phase ends while the GPU still
works), deletes every tensor (unload) and runs the strategy's release:
drop does nothing, sync calls torch.cuda.synchronize(), cache-flush
synchronizes and calls torch.cuda.empty_cache(). memrel's VRAM samples show
which of these gives the memory back to the device; the release notes give
PyTorch's own allocated/reserved numbers.

With the default size (16384: 1 GiB per matrix, about 4 GiB at the peak) the
queued products keep an H100/H200 busy for roughly a second per cycle.
"""

import argparse
import time

import _common
from _common import memrel, torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=16384, help="matrix side (fp32: size^2 * 4 bytes each)")
    ap.add_argument("--products", type=int, default=8, help="matrix products queued per cycle")
    args = ap.parse_args()
    dev = _common.cuda_device()
    gib = args.size * args.size * 4 / 2.0 ** 30

    with memrel.phase("warmup") as p:
        p.note = "%s; %s" % (
            _common.cuda_context(dev),
            _common.versions("TF32 matmul %s" % torch.backends.cuda.matmul.allow_tf32),
        )
    memrel.baseline(0.5)

    for _ in range(memrel.cycles()):
        with memrel.phase("load", model="matrices") as p:
            x = torch.randn(args.size, args.size, device=dev)
            y = torch.randn(args.size, args.size, device=dev) / args.size ** 0.5
            torch.cuda.synchronize(dev)
            p.note = "two %dx%d fp32 matrices, %.2f GiB each" % (args.size, args.size, gib)
        with memrel.phase("forward", model="matrices") as p:
            t0 = time.perf_counter()
            z = x @ y
            for _ in range(args.products - 1):
                z = z @ y  # each product a new tensor; the previous one goes back to the cache
            issued = time.perf_counter() - t0
            p.note = "%d products queued in %.1f ms without waiting; allocated %.2f GiB, reserved %.2f GiB" % (
                args.products,
                issued * 1000,
                torch.cuda.memory_allocated(dev) / 2.0 ** 30,
                torch.cuda.memory_reserved(dev) / 2.0 ** 30,
            )
        with memrel.phase("unload", model="matrices") as p:
            del x, y, z
            p.note = "deleted; allocated %.2f GiB, reserved %.2f GiB" % (
                torch.cuda.memory_allocated(dev) / 2.0 ** 30,
                torch.cuda.memory_reserved(dev) / 2.0 ** 30,
            )
        memrel.release()
        memrel.settle(0.3)


if __name__ == "__main__":
    main()
