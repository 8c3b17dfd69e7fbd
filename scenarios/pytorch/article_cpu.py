"""The article's CPU experiment ("How to Release HuggingFace (PyTorch) Models
from RAM/VRAM"): three models loaded in turn with AutoModel.from_pretrained,
one forward pass each, then deleted one by one with the strategy's release
after each delete; once per cycle.

    --load zero-copy  plain from_pretrained: transformers 5 keeps the weights
                      file-backed (RssFile), so rss - shared barely moves
    --load copy       every weight cloned into anonymous memory (glibc's heap
                      and mmaps), where the article's transformers 4.x had them

The article's strategies map to memrel's: del + gc.collect() = gc-collect,
ctypes malloc_trim(0) = malloc-trim, MALLOC_TRIM_THRESHOLD_=-1 set inside
Python = trim-threshold-inside, set on the environment = trim-threshold-env.
"""

import argparse

import _common
from _common import memrel

# The article's order: bert-base-uncased, gpt2 (here a Qwen2 decoder), bert-base-japanese-v2.
ARTICLE_ORDER = ("bert", "decoder", "bert-ja")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", choices=("zero-copy", "copy"), default="zero-copy")
    ap.add_argument("--seq", type=int, default=16, help="tokens in the forward pass (batch 1)")
    args = ap.parse_args()
    if memrel.device() != "cpu":
        raise RuntimeError("article_cpu.py runs on cpu, not %s (see article_gpu.py)" % memrel.device())
    copy = args.load == "copy"
    models = _common.ordered_models(ARTICLE_ORDER)

    with memrel.phase("warmup") as p:
        p.note = _common.warm_up([path for _, path in models])
    memrel.baseline(0.5)

    first = True
    for _ in range(memrel.cycles()):
        loaded = {}
        for mid, path in models:
            with memrel.phase("load", model=mid) as p:
                loaded[mid] = _common.load(path, copy=copy)
                p.note = _common.mapping_of(path)
                if first:
                    p.note = _common.versions("load=%s; %s" % (args.load, p.note))
                    first = False
            with memrel.phase("forward", model=mid):
                _common.forward(loaded[mid], seq=args.seq)
        _common.unload_all(loaded, models)


if __name__ == "__main__":
    main()
