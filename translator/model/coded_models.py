"""The models frameworks define in their own code, as shapes: torchtitan's llama3 flavors and
config functions, nanotron's model classes and their defaults. Read from their sources
(torchtitan 0.2.2's ``llama3_args`` and 0.3.0's ``llama3_configs``; nanotron's
``LlamaConfig``/``Qwen2Config``), so a job that names one resolves without importing either.
"""

from __future__ import annotations

from dataclasses import dataclass

from translator.model.memory import Model


@dataclass(frozen=True)
class Flavor:
    """A torchtitan llama3 flavor's arguments, as its model code takes them."""

    dim: int
    """The model width."""
    n_layers: int
    """Transformer blocks."""
    n_heads: int
    """Attention heads."""
    n_kv_heads: int | None
    """Key/value heads; None: ``n_heads``."""
    vocab_size: int
    """Vocabulary size."""
    multiple_of: int
    """The FFN width is rounded up to a multiple of this."""
    ffn_dim_multiplier: float | None
    """Scales the FFN width before rounding; None: 1."""
    tied: bool = False
    """The output head shares the embedding's weights (0.3.0's 1B and 3B)."""


def ffn_hidden_dim(dim: int, multiple_of: int, ffn_dim_multiplier: float | None = None) -> int:
    """torchtitan's SwiGLU width (``compute_ffn_hidden_dim``, ``FeedForward`` before 0.3.0):
    two thirds of 4 × dim, scaled, rounded up to ``multiple_of``."""
    hidden = int(2 * 4 * dim / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def flavor_shape(name: str, flavor: Flavor) -> Model:
    """The shape of a llama3 flavor: SwiGLU, RMSNorm, rotary, no biases."""
    return Model(
        name=name,
        layers=flavor.n_layers,
        hidden=flavor.dim,
        heads=flavor.n_heads,
        kv_heads=flavor.n_kv_heads or flavor.n_heads,
        ffn=ffn_hidden_dim(flavor.dim, flavor.multiple_of, flavor.ffn_dim_multiplier),
        vocab=flavor.vocab_size,
        gated=True,
        tied=flavor.tied,
        biases=False,
    )


_DEBUG = Flavor(256, 6, 16, None, 2048, 256, None)
_8B = Flavor(4096, 32, 32, 8, 128256, 1024, 1.3)
#: torchtitan's llama3 flavors, both generations (0.2.2's attention variants share a shape).
LLAMA3 = {
    "debugmodel": _DEBUG,
    "debugmodel_flex_attn": _DEBUG,
    "debugmodel_varlen_attn": _DEBUG,
    "1B": Flavor(2048, 16, 32, 8, 128256, 1024, 1.5, tied=True),
    "3B": Flavor(3072, 28, 24, 8, 128256, 1024, 1.0, tied=True),
    "8B": _8B,
    "8B_flex": _8B,
    "8B_varlen": _8B,
    "70B": Flavor(8192, 80, 64, 8, 128256, 4096, 1.3),
    "405B": Flavor(16384, 126, 128, 8, 128256, 4096, 1.2),
}
#: torchtitan ≤ 0.2.2's ``[model]`` defaults: a job file without them trains this.
DEFAULT_MODEL = ("llama3", "debugmodel")
#: torchtitan 0.3.0's llama3 config functions (``--config``) -> the flavor they build; the
#: float8/MXFP8/NVFP4 ones convert its linear layers and keep their parameters. Not here:
#: ``llama3_debugmodel_float8_emulate_lora``, whose LoRA adapters add parameters.
LLAMA3_CONFIGS = {
    "llama3_debugmodel": "debugmodel",
    "llama3_debugmodel_varlen_attn": "debugmodel",
    "llama3_debugmodel_dist_gemm": "debugmodel",
    "llama3_debugmodel_float8": "debugmodel",
    "llama3_debugmodel_nvfp4": "debugmodel",
    "llama3_debugmodel_first_85_pct_layers_nvfp4": "debugmodel",
    "llama3_debugmodel_ce_loss": "debugmodel",
    "sft_debugmodel": "debugmodel",
    "llama3_8b": "8B",
    "llama3_8b_first_85_pct_layers_nvfp4": "8B",
    "llama3_8b_mxfp8": "8B",
    "llama3_70b": "70B",
    "llama3_405b": "405B",
}


def torchtitan_model(name: str, flavor: str) -> tuple[Model | None, str]:
    """``(shape, architecture)`` of torchtitan's ``name`` model's ``flavor``; the shape is None
    (the text then says why) for one batchspec does not know."""
    if name == "llama3" and flavor in LLAMA3:
        return flavor_shape(f"{name}-{flavor}", LLAMA3[flavor]), f"{name} {flavor}"
    return None, f"{name} {flavor} is not a torchtitan flavor batchspec knows (llama3's are)"


def torchtitan_config(module: str, function: str) -> tuple[Model | None, str]:
    """``(shape, architecture)`` of torchtitan 0.3.0's ``--module``/``--config``; None (the
    text says why) for a config function batchspec does not know."""
    flavor = (
        LLAMA3_CONFIGS.get(function) if module in ("llama3", "torchtitan.models.llama3") else None
    )
    if flavor is None:
        return None, (
            f"--module {module} --config {function} is a Python function batchspec does not run "
            "and whose model it does not know"
        )
    model, architecture = torchtitan_model("llama3", flavor)
    return model, f"{architecture} ({function})"


#: nanotron's ``LlamaConfig`` and ``Qwen2Config`` defaults for the keys of a shape (the same in
#: 0.4 and after): a ``model_config`` that leaves one out trains this.
NANOTRON_DEFAULTS = {
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "tie_word_embeddings": False,
    "vocab_size": 32000,
    "attention_bias": False,
}
#: The markers of nanotron's model classes batchspec counts (``is_llama_config: true``); any
#: other ``is_..._config`` (Starcoder2, and the examples' Mamba and LlaMoE) is a model it does not.
NANOTRON_MARKERS = ("is_llama_config", "is_qwen2_config")


def is_marker(key: str) -> bool:
    """Whether ``key`` marks a nanotron model class (``is_llama_config``)."""
    return key.startswith("is_") and key.endswith("_config")


def nanotron_config(config: dict) -> tuple[dict | None, str]:
    """``(Hugging Face keys, architecture)`` of a nanotron ``model_config``, its class's
    defaults filled in; None (the text says why) for one batchspec does not count."""
    other = [k for k in config if is_marker(k) and k not in NANOTRON_MARKERS and config[k]]
    if other:
        return (
            None,
            f"{other[0]}: not a model class batchspec counts (nanotron's Llama and Qwen2 are)",
        )
    if config.get("moe_config"):
        return None, "moe_config: a mixture of experts is not a shape batchspec counts"
    qwen2 = bool(config.get("is_qwen2_config"))
    filled = NANOTRON_DEFAULTS | {k: v for k, v in config.items() if v is not None}
    return filled, "Qwen2Config (nanotron)" if qwen2 else "LlamaConfig (nanotron)"
