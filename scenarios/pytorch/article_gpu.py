"""The article's GPU experiment ("How to Release HuggingFace (PyTorch) Models
from RAM/VRAM"): three models loaded in turn with AutoModel.from_pretrained and
moved to the GPU, one forward pass each, then deleted one by one with the
strategy's release after each delete; once per cycle.

The article's claims to check: after `del model; gc.collect()` VRAM never falls
(PyTorch's caching allocator keeps it: strategies drop, gc-collect); adding
torch.cuda.empty_cache() brings it down to the CUDA context (empty-cache,
cache-flush); ipc_collect() and clearing cuBLAS workspaces add nothing here
(ipc-collect); cudaDeviceReset() reaches ~0 but breaks PyTorch afterwards
(device-reset, unsupported, opt-in).
"""

import argparse

import _common
from _common import memrel, torch

ARTICLE_ORDER = ("bert", "decoder", "bert-ja")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=16, help="tokens in the forward pass (batch 1)")
    args = ap.parse_args()
    dev = _common.cuda_device()
    models = _common.ordered_models(ARTICLE_ORDER)

    with memrel.phase("warmup") as p:
        p.note = "%s; %s" % (_common.cuda_context(dev), _common.warm_up([path for _, path in models]))
    memrel.baseline(0.5)

    first = True
    for _ in range(memrel.cycles()):
        loaded = {}
        for mid, path in models:
            with memrel.phase("load", model=mid) as p:
                loaded[mid] = _common.load(path, dev=dev)
                torch.cuda.synchronize(dev)
                if first:
                    p.note = _common.versions("load=from_pretrained + .to(%s)" % dev)
                    first = False
            with memrel.phase("forward", model=mid):
                _common.forward(loaded[mid], seq=args.seq, dev=dev)
        _common.unload_all(loaded, models)


if __name__ == "__main__":
    main()
