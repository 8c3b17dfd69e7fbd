"""What the seed scripts share: memrel imported first, offline transformers,
loading the checkpoints memrel wrote, small inputs.

Imported before torch by every script, so memrel's start actions (mallopt,
say) run before torch allocates anything.
"""

import inspect
import json
import os
import struct
import sys

# Never download: the checkpoints are the directories memrel wrote.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

try:
    import memrel
except ImportError:  # run bare from a checkout: use the module next to memrel's source
    sys.path.insert(
        0,
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"),
    )
    import memrel

import torch  # noqa: E402  (after memrel, on purpose)
import transformers  # noqa: E402

transformers.utils.logging.disable_progress_bar()


def versions(extra=""):
    text = "torch %s, transformers %s, python %s" % (
        torch.__version__,
        transformers.__version__,
        sys.version.split()[0],
    )
    return text + (", " + extra if extra else "")


def ordered_models(preferred=()):
    """memrel.models() with the ids in `preferred` first, in that order."""
    found = memrel.models()
    if not found:
        raise RuntimeError(
            "no models: run under memrel (a scenario's [models]) or set MEMREL_MODELS="
            "'{\"bert\": \"/path/to/dir\"}' to HuggingFace-layout directories "
            "(memrel model gen bert-base DIR writes one)"
        )
    ids = [m for m in preferred if m in found] + [m for m in found if m not in preferred]
    return [(m, found[m]) for m in ids]


def cuda_device():
    """memrel's device as a torch.device; a clear error when CUDA is missing."""
    name = memrel.device()
    script = os.path.basename(sys.argv[0])
    if not name.startswith("cuda"):
        raise RuntimeError(
            "%s measures CUDA memory, but the device is %r: run it with device = \"cuda\" "
            "(MEMREL_DEVICE=cuda:0)" % (script, name)
        )
    if not torch.cuda.is_available():
        raise RuntimeError(
            "%s needs CUDA, but torch.cuda.is_available() is False (torch %s, built for CUDA %s, "
            "CUDA_VISIBLE_DEVICES=%r)"
            % (script, torch.__version__, torch.version.cuda, os.environ.get("CUDA_VISIBLE_DEVICES"))
        )
    dev = torch.device(name)
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise RuntimeError(
            "%s: %s asked for, but torch sees %d CUDA device(s)"
            % (script, name, torch.cuda.device_count())
        )
    return dev


def _checkpoint_tensor_names(path):
    """Tensor names in DIR/model.safetensors (the JSON header only), or None."""
    try:
        with open(os.path.join(path, "model.safetensors"), "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
    except (OSError, ValueError, struct.error):
        return None
    return [k for k in header if k != "__metadata__"]


def _model_kwargs(path, config):
    # memrel's BERT presets hold the encoder only, as candle's BertModel loads
    # it; a BertModel built with its pooler would get random pooler weights
    # (transformers reports them MISSING). Build the pooler only when the
    # checkpoint has one (a real bert-base-uncased does).
    if config.model_type == "bert":
        names = _checkpoint_tensor_names(path)
        if names is not None:
            return {"add_pooling_layer": any(".pooler." in "." + n for n in names)}
    return {}


def warm_up(paths):
    """Import each model's class (transformers imports its modelling code lazily,
    ~100 MiB of anonymous memory that the first load would otherwise carry) and
    run one small matrix product."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING

    names = []
    for path in paths:
        config = transformers.AutoConfig.from_pretrained(path)
        names.append(MODEL_MAPPING[type(config)].__name__)
    x = torch.randn(64, 64)
    (x @ x).sum().item()
    return "imported %s; one 64x64 matmul" % ", ".join(sorted(set(names)))


def load(path, copy=False, dev=None):
    """AutoModel.from_pretrained(path), in eval mode.

    copy=False: plain from_pretrained. transformers 5 leaves the weights as
    views of the safetensors file's private mapping, so they count as RssFile,
    and only the pages something touches become resident.
    copy=True: then replace every parameter and buffer with a .clone(): new
    storage from torch's CPU allocator (glibc malloc, so anonymous memory) and
    the file mapping dropped with the last view. That is where weights sat
    under transformers 4.x (the article's), which copied them into a freshly
    initialised model, and where glibc's heap can keep them after a free.
    dev: move the model there afterwards (.to(dev)).
    """
    config = transformers.AutoConfig.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path, config=config, **_model_kwargs(path, config))
    if copy:
        with torch.no_grad():
            for p in model.parameters():
                p.data = p.data.clone()
            for module in model.modules():
                for name, b in list(module._buffers.items()):
                    if b is not None:
                        module._buffers[name] = b.clone()
    if dev is not None:
        model = model.to(dev)
    return model.eval()


def mapping_of(path):
    """How much of DIR/model.safetensors this process has mapped (from /proc/self/maps)."""
    target = os.path.realpath(os.path.join(path, "model.safetensors"))
    total = 0
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].strip() == target:
                    lo, hi = parts[0].split("-")
                    total += int(hi, 16) - int(lo, 16)
    except OSError:
        return "mapping unknown"
    if not total:
        return "model.safetensors not mapped"
    return "model.safetensors mapped (%.1f MiB)" % (total / 1048576.0)


def inputs(model, batch=1, seq=16, dev=None):
    """Random token ids (within the first 1000 of the vocabulary)."""
    vocab = getattr(model.config, "vocab_size", 1000) or 1000
    return torch.randint(0, min(vocab, 1000), (batch, seq), device=dev)


def forward(model, batch=1, seq=16, dev=None):
    """One inference forward pass under no_grad; returns nothing (no output kept)."""
    ids = inputs(model, batch, seq, dev)
    kwargs = {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters else {}
    with torch.no_grad():
        out = model(input_ids=ids, **kwargs)
        # Read one number back: on CUDA this waits for the forward to finish.
        out.last_hidden_state[0, 0, 0].item()
    del out, ids


def cuda_context(dev):
    """The CUDA context, cuBLAS's handle and workspace (the floor that stays):
    one tensor and one 64x64 matmul on `dev`. Returns a note naming the GPU."""
    torch.zeros(1, device=dev)
    x = torch.randn(64, 64, device=dev)
    (x @ x).sum().item()
    del x
    return "CUDA context on %s (%s) + one 64x64 matmul" % (dev, torch.cuda.get_device_name(dev))


def unload_all(loaded, models):
    """Unloads every model in `loaded` (one unload phase each, in `models`'
    order), releases after each, then lets the memory settle. A strategy
    that moves or detaches the model (to-cpu, accelerate-release) gets it in
    release(), as accelerate's release_memory does; the others release after
    the del."""
    for mid, _ in models:
        with memrel.phase("unload", model=mid):
            model = loaded.pop(mid)
            if not memrel.takes_objects():
                model = None
        memrel.release(*([] if model is None else [model]))
        model = None
    memrel.settle(0.3)
