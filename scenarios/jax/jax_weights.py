"""JAX: a transformer-sized set of weights as JAX arrays on memrel's device,
loaded, run forward (a jitted encoder layer per block), deleted, and the
strategy's release (memrel.release()); once per cycle.

On a GPU the XLA client preallocates 75 % of the card when JAX first touches
it; the warm-up only imports jax, so that happens inside the first load,
where memrel sees it. The xla- strategies set the client's variables in the
environment at start (memrel checks they arrived and reports the client's
memory_stats()); jax-clear deletes every live array and clears JAX's caches.

Needs jax (pip install jax; jax[cuda12] for jax-gpu); runs bare too.
"""

import argparse
import gc
import os
import sys
import time

try:
    import memrel
except ImportError:  # run bare from a checkout: use the module next to memrel's source
    sys.path.insert(
        0,
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"),
    )
    import memrel

import jax  # noqa: E402  (after memrel, on purpose)
import jax.numpy as jnp  # noqa: E402


def jax_device():
    name = memrel.device()
    if name.startswith("cuda"):
        index = int(name.split(":")[1]) if ":" in name else 0
        try:
            return jax.devices("gpu")[index]
        except RuntimeError as e:
            raise SystemExit(
                "jax_weights.py: memrel asks for %s but jax has no GPU (%s): install jax[cuda12]" % (name, e)
            ) from None
    return jax.devices("cpu")[0]


def make_weights(dev, layers, dim, ffn, seed):
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), layers * 6))
    shapes = {"wq": (dim, dim), "wk": (dim, dim), "wv": (dim, dim), "wo": (dim, dim), "w1": (dim, ffn), "w2": (ffn, dim)}
    weights = []
    with jax.default_device(dev):
        for _ in range(layers):
            weights.append({n: jax.random.normal(next(keys), s, dtype=jnp.float32) * 0.02 for n, s in shapes.items()})
    jax.block_until_ready(weights)
    return weights


@jax.jit
def layer(x, w):
    q, k, v = x @ w["wq"], x @ w["wk"], x @ w["wv"]
    scores = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / jnp.sqrt(q.shape[-1]), axis=-1)
    x = x + (scores @ v) @ w["wo"]
    return x + jax.nn.relu(x @ w["w1"]) @ w["w2"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    args = ap.parse_args()

    with memrel.phase("warmup") as p:
        p.note = "jax %s, python %s; the device is first touched at the load" % (jax.__version__, sys.version.split()[0])
    memrel.baseline(0.5)

    params = args.layers * (4 * args.dim * args.dim + 2 * args.dim * args.ffn)
    for cycle in range(memrel.cycles()):
        with memrel.phase("load", model="weights") as p:
            dev = jax_device()
            weights = make_weights(dev, args.layers, args.dim, args.ffn, seed=cycle)
            p.note = "%d layers x %d (ffn %d): %.1f M parameters, %.1f MiB f32 on %s (%s)" % (
                args.layers, args.dim, args.ffn, params / 1e6, params * 4 / 1048576.0, dev, dev.device_kind,
            )
        with memrel.phase("forward", model="weights") as p:
            t0 = time.perf_counter()
            with jax.default_device(dev):
                x = jax.random.normal(jax.random.PRNGKey(99), (args.batch, args.seq, args.dim), dtype=jnp.float32)
            for w in weights:
                x = layer(x, w)
            out = float(jnp.sum(x))
            p.note = "batch %d x %d, %.1f ms (with the first call's compilation), sum %.3g" % (
                args.batch, args.seq, (time.perf_counter() - t0) * 1000.0, out,
            )
        with memrel.phase("unload", model="weights"):
            del weights, x, w
            gc.collect()
        memrel.release()


if __name__ == "__main__":
    main()
