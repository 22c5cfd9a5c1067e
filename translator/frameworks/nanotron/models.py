"""The model a nanotron job trains: the ``model.model_config`` of the YAML its launch names,
a Llama or Qwen2 class's keys with that class's defaults where the file leaves one out
(nanotron's ``LlamaConfig``/``Qwen2Config``), counted as the Hugging Face config they mirror.
Another model class, a mixture of experts, or a job whose YAML is not read is unknown, saying
why."""

from __future__ import annotations

from translator.model.named_model import NamedModel, carried_model, section
from translator.reading import Reading

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


def named_model(reading: Reading) -> NamedModel:
    """The ``model_config`` a nanotron reading carries, in its ``model`` block (from the YAML
    its launch names) or in its own YAML; unknown, with why, when there is none."""
    for config in [reading, *reading.partners]:
        block = config.values.get("model")
        if block is not None:
            carried = section(block.value, "model_config")
            if carried is not None:
                return _carried(carried, block.file or config.path)
    values = reading.values
    unknown = [v.why_unknown for v in values.values() if v.value is None and v.why_unknown]
    why = unknown[0].removeprefix("unknown: ") if unknown else "no model.model_config block"
    return NamedModel(f"{reading.path}: model", None, None, None, f"{why}; give --model-config")


def _carried(config: dict, where: str) -> NamedModel:
    """A ``model_config``, its class's defaults filled in, counted as Hugging Face keys."""
    filled, architecture = nanotron_config(config)
    if filled is None:
        named = f"{where}: model_config"
        return NamedModel(named, None, None, None, f"{architecture}; give --model-config")
    return carried_model(filled, where, architecture)
