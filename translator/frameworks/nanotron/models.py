"""The model a nanotron job trains: the ``model.model_config`` of the YAML its launch names,
a Llama or Qwen2 class's keys with that class's defaults where the file leaves one out
(nanotron's ``LlamaConfig``/``Qwen2Config``), counted as the Hugging Face config they mirror.
Another model class, a mixture of experts, or a job whose YAML is not read is unknown, saying
why."""

from __future__ import annotations

from translator.model.matching import source_model
from translator.model.memory import Model
from translator.model.named_model import NamedModel, carried_model, section
from translator.rank.model import not_llama
from translator.reading import Reading
from translator.render import comment_lines
from translator.spec import BatchSpec
from translator.words.findings import Finding, finding

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


def model_config(shape: Model, positions: int | None) -> dict:
    """nanotron's ``LlamaConfig`` of a Llama-style ``shape`` (``model.model_config``), its
    positions ``positions`` (None: its default)."""
    config = {
        "hidden_size": shape.hidden,
        "intermediate_size": shape.ffn,
        "num_attention_heads": shape.heads,
        "num_hidden_layers": shape.layers,
        "num_key_value_heads": shape.kv_heads,
        "vocab_size": shape.vocab,
        "tie_word_embeddings": shape.tied,
    }
    if positions is not None:
        config["max_position_embeddings"] = positions
    return config | {"is_llama_config": True}


def model_context(spec: BatchSpec, named: NamedModel | None) -> tuple[dict, list[Finding]]:
    """The rendered file's ``model.model_config``: the source's model as nanotron's
    ``LlamaConfig`` (:func:`model_config`, positions the sequence length); none, saying why,
    for a model not known or one nanotron's Llama cannot build."""
    none: dict = {"model_config": None, "model_lines": []}
    if named is None:
        return none, []
    source = source_model(named)
    shape = named.model
    why = "it is not known" if shape is None else not_llama(shape, "nanotron")
    if shape is None or why is not None:
        said = f"nanotron.yaml names no model: {str(why).split('; give')[0]}: {source}"
        hint = "write your model's model_config in your nanotron config's model block"
        return none, [finding("model-not-matched", said, hint=hint)]
    config = model_config(shape, spec.sequence_length)
    said = f"nanotron.yaml carries the source's model as LlamaConfig: {source}"
    lines = comment_lines(f"The source's model, as nanotron's LlamaConfig: {source}.")
    carried = {"model_config": list(config.items()), "model_lines": lines}
    return carried, [finding("model-carried", said)]
