"""Writes tiny checkpoints of every decoder family memrel loads with the real
transformers `save_pretrained`, for tests/it/checkpoints.rs.

Usage: python scripts/write_checkpoints.py OUT_DIR [FAMILY ...]

For each family it writes, under OUT_DIR/<family>-<kind>-<dtype>[-sharded][-tied]:
the base class (`*Model`: tensor names without `model.`, no `lm_head`) and the
`*ForCausalLM` class, tied and untied, in float32 and bfloat16 (float16 for
one), one of them sharded with a small `max_shard_size`. Weights are random
(seeded); nothing is downloaded. Prints one line per directory written.
It must not touch anything outside OUT_DIR.
"""

import sys
from pathlib import Path

import torch
import transformers

SIZE = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)

# family -> (config class, base class, causal class, extra config keys)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaModel", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2Model", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3Model", "Qwen3ForCausalLM", {"head_dim": 16}),
    "mistral": ("MistralConfig", "MistralModel", "MistralForCausalLM", {"sliding_window": None}),
    "gemma2": ("Gemma2Config", "Gemma2Model", "Gemma2ForCausalLM", {"head_dim": 16, "sliding_window": 32}),
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma3TextModel",
        "Gemma3ForCausalLM",
        {"head_dim": 16, "sliding_window": 32},
    ),
    "phi3": (
        "Phi3Config",
        "Phi3Model",
        "Phi3ForCausalLM",
        {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    ),
}

# (kind, dtype, sharded, tied): every family gets each of these.
VARIANTS = [
    ("base", torch.float32, False, False),
    ("base", torch.bfloat16, True, False),
    ("causal", torch.float32, False, False),
    ("causal", torch.float32, False, True),
    ("causal", torch.bfloat16, False, False),
    ("causal", torch.float16, True, True),
]

DTYPE_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def write(out: Path, family: str) -> None:
    config_class, base_class, causal_class, extra = FAMILIES[family]
    for kind, dtype, sharded, tied in VARIANTS:
        torch.manual_seed(0)
        config = getattr(transformers, config_class)(**SIZE, **extra, tie_word_embeddings=tied)
        cls = getattr(transformers, base_class if kind == "base" else causal_class)
        model = cls(config).to(dtype)
        name = f"{family}-{kind}-{DTYPE_NAMES[dtype]}"
        name += "-sharded" if sharded else ""
        name += "-tied" if tied else ""
        target = out / name
        kwargs = {"max_shard_size": "20KB"} if sharded else {}
        model.save_pretrained(target, **kwargs)
        print(target, flush=True)


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: write_checkpoints.py OUT_DIR [FAMILY ...]")
    out = Path(sys.argv[1])
    families = sys.argv[2:] or list(FAMILIES)
    for family in families:
        if family not in FAMILIES:
            sys.exit(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
        write(out, family)


if __name__ == "__main__":
    main()
