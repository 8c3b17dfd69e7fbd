"""Sleep and wake a transformers model on the GPU, as model servers do instead
of unloading (vLLM's sleep, SGLang's release/resume_memory_occupation,
torch_memory_saver), three ways, one per memrel strategy:

  offload         model.to("cpu") to sleep, model.to(dev) to wake: pageable copies
  offload-pinned  every parameter and buffer copied into its own page-locked host
                  buffer (torch.empty(..., pin_memory=True)) and back
  reload          del model to sleep, from_pretrained + .to(dev) to wake

A cycle: load, forward, then `--sleeps` times (sleep, asleep, wake, forward),
unload and the strategy's release (synchronize, empty_cache). The sleep phase
ends before torch.cuda.empty_cache(), which the asleep phase begins with, so
memrel's VRAM readings give VRAM asleep before and after the cache is
flushed. The notes carry copied bytes and rates as key=value fields, and the
warm-up measures the pinned copy ceiling on a buffer of the model's size.
"""

import argparse
import gc
import time

import _common
from _common import memrel, torch

GIB = float(2 ** 30)


def state_tensors(model):
    """Every parameter and buffer of `model`, each once."""
    seen, out = set(), []
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def model_bytes(model):
    return sum(t.numel() * t.element_size() for t in state_tensors(model))


def fields(nbytes, secs):
    rate = nbytes / secs / GIB if secs > 0 else 0.0
    return "copied_bytes=%d copy_s=%.6f gib_per_s=%.2f" % (nbytes, secs, rate)


def ceiling(nbytes, dev):
    """Best of three pinned copies of one buffer each way, GiB/s."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    gpu = torch.zeros(nbytes, dtype=torch.uint8, device=dev)
    d2h = h2d = 0.0
    for _ in range(3):
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        host.copy_(gpu, non_blocking=True)
        torch.cuda.synchronize(dev)
        d2h = max(d2h, nbytes / (time.perf_counter() - t0) / GIB)
        t0 = time.perf_counter()
        gpu.copy_(host, non_blocking=True)
        torch.cuda.synchronize(dev)
        h2d = max(h2d, nbytes / (time.perf_counter() - t0) / GIB)
    del host, gpu
    torch.cuda.empty_cache()
    return d2h, h2d


def sleep(model, mode, dev):
    """Puts `model` to sleep; returns (what wake needs, note)."""
    if mode == "reload":
        return None, "mode=reload"
    nbytes = model_bytes(model)
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    if mode == "offload":
        model.to("cpu")
        torch.cuda.synchronize(dev)
    elif mode == "offload-pinned":
        with torch.no_grad():
            for t in state_tensors(model):
                buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                buf.copy_(t.data, non_blocking=True)
                t.data = buf
        torch.cuda.synchronize(dev)
    else:
        raise RuntimeError("strategy %r does not put a model to sleep: run with offload, offload-pinned or reload" % mode)
    return model, "mode=%s %s" % (mode, fields(nbytes, time.perf_counter() - t0))


def wake(asleep, mode, path, dev):
    """Wakes the model; returns (model, note)."""
    t0 = time.perf_counter()
    if mode == "reload":
        model = _common.load(path, dev=dev)
        torch.cuda.synchronize(dev)
        return model, "read from the model's files wake_s=%.6f" % (time.perf_counter() - t0)
    model = asleep
    nbytes = model_bytes(model)
    if mode == "offload":
        model.to(dev)
    else:
        with torch.no_grad():
            for t in state_tensors(model):
                t.data = t.data.to(dev, non_blocking=True)
    torch.cuda.synchronize(dev)
    return model, fields(nbytes, time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sleeps", type=int, default=2, help="sleep/wake rounds per cycle")
    ap.add_argument("--asleep", type=float, default=1.0, help="seconds asleep each round")
    args = ap.parse_args()
    dev = _common.cuda_device()
    mode = memrel.strategy()
    mid, path = _common.ordered_models(("decoder", "bert"))[0]

    with memrel.phase("warmup") as p:
        note = "%s; %s" % (_common.cuda_context(dev), _common.warm_up([path]))
        model = _common.load(path, dev=dev)
        size = model_bytes(model)
        del model
        gc.collect()
        torch.cuda.empty_cache()
        d2h, h2d = ceiling(size, dev)
        p.note = "%s; pinned copy ceiling over %.0f MiB: ceiling_d2h_gib_s=%.2f ceiling_h2d_gib_s=%.2f" % (
            note, size / 2.0 ** 20, d2h, h2d)
    memrel.baseline(0.5)

    for _ in range(memrel.cycles()):
        with memrel.phase("load", model=mid):
            model = _common.load(path, dev=dev)
            torch.cuda.synchronize(dev)
        with memrel.phase("forward", model=mid):
            _common.forward(model, dev=dev)
        for _ in range(args.sleeps):
            with memrel.phase("sleep", model=mid) as p:
                model, p.note = sleep(model, mode, dev)
                gc.collect()
            with memrel.phase("asleep") as p:
                torch.cuda.empty_cache()
                time.sleep(args.asleep)
                p.note = "empty_cache() at its begin; reserved %.1f MiB" % (torch.cuda.memory_reserved(dev) / 2.0 ** 20)
            with memrel.phase("wake", model=mid) as p:
                model, p.note = wake(model, mode, path, dev)
            with memrel.phase("forward", model=mid):
                _common.forward(model, dev=dev)
        with memrel.phase("unload", model=mid):
            model = None
            gc.collect()
        memrel.release()
        memrel.settle(0.3)


if __name__ == "__main__":
    main()
