"""A stand-in for a model server that swaps models: each cycle it loads a
"model" (many small buffers, as a framework's parameters and their
bookkeeping are), runs it, drops it and keeps a little state (a request log)
that outlives the model. Standard library only, so it runs anywhere Python 3
does; with memrel it is measured, without memrel it runs bare.

    python3 swap.py --mib 64           # bare
    memrel exec -- python3 swap.py     # measured (or: memrel run --scenario swap.toml)
"""

import argparse
import contextlib

try:
    import memrel  # memrel puts its module on PYTHONPATH when it runs the program
except ImportError:  # run bare, without memrel: the markers do nothing, one cycle

    class memrel:  # noqa: N801 (stands in for the module)
        phase = staticmethod(lambda *a, **k: contextlib.nullcontext())
        baseline = settle = release = staticmethod(lambda *a, **k: None)
        cycles = staticmethod(lambda: 1)


def load(mib, chunk_bytes):
    """A model of `mib` MiB in buffers of `chunk_bytes`, each filled so its pages are resident."""
    n = mib * (1 << 20) // chunk_bytes
    return [bytearray(b"\x01" * chunk_bytes) for _ in range(n)]


def forward(model):
    """Reads every buffer once (what a forward pass does to its weights)."""
    return sum(buf[0] for buf in model)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=64, help="the model's size in MiB")
    ap.add_argument("--chunk-kib", type=int, default=16, help="one buffer's size in KiB")
    args = ap.parse_args()
    request_log = []

    memrel.baseline(0.3)
    for _ in range(memrel.cycles()):
        with memrel.phase("load", model="toy"):
            model = load(args.mib, args.chunk_kib * 1024)
        with memrel.phase("forward", model="toy"):
            forward(model)
        # State that outlives the model, allocated after it: it sits above the
        # model's buffers on glibc's heap, which then cannot shrink from the top.
        request_log.append(bytearray(64 * 1024))
        with memrel.phase("unload", model="toy"):
            del model
        memrel.release()  # the strategy's release steps (gc, malloc_trim, ...)
        memrel.settle(0.3)
    print("served %d cycles, %d log entries" % (memrel.cycles(), len(request_log)))


if __name__ == "__main__":
    main()
