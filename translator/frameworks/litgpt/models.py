"""The model a litgpt config trains, read without torch: ``model_config`` written in the file
(litgpt's ``Config`` fields, its defaults for the rest), else ``model_name`` (one of litgpt's
configs: the common ones are copied here in :data:`CONFIGS`), else, for a finetune, the
``model_config.yaml`` of its ``checkpoint_dir`` when that folder is here. litgpt's ``GPT``
never ties its head to the embedding, so none of these shapes is tied. A shape batchspec's
count cannot express (experts, latent attention, a LayerNorm beside bias-free layers) is
unknown, saying why.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from translator.model.matching import differences, nearest, source_model
from translator.model.memory import Model
from translator.model.named_model import NamedModel, resolve
from translator.reading import Reading
from translator.render import comment_lines
from translator.spec import BatchSpec
from translator.words.findings import Finding, finding

#: litgpt ``Config``'s defaults of the fields read here.
DEFAULTS: dict = {
    "n_layer": 16,
    "n_embd": 4096,
    "n_head": 32,
    "vocab_size": 50254,
    "padding_multiple": 512,
    "bias": True,
    "mlp_class_name": "GptNeoxMLP",
    "norm_class_name": "LayerNorm",
}
#: Its gated MLPs (three matrices).
GATED = ("LLaMAMLP", "GemmaMLP")
#: Endings of a name that do not change the shape (chat and instruct tunes, HF's ``-hf``).
TUNES = ("-hf", "-chat", "-instruct")


def _neox(layers, embd, heads, groups, ffn, vocab, **more) -> dict:
    return {
        "n_layer": layers,
        "n_embd": embd,
        "n_head": heads,
        "n_query_groups": groups,
        "intermediate_size": ffn,
        "padded_vocab_size": vocab,
    } | more


def _llama(layers, embd, heads, groups, ffn, vocab, **more) -> dict:
    llama = {"mlp_class_name": "LLaMAMLP", "norm_class_name": "RMSNorm", "bias": False}
    return _neox(layers, embd, heads, groups, ffn, vocab, **(llama | more))


#: litgpt's configs by name (litgpt 0.5.13's ``litgpt/config.py``), the fields that set
#: their shape.
CONFIGS: dict[str, dict] = {
    "Llama-2-13b-hf": _llama(40, 5120, 40, 40, 13824, 32000),
    "Llama-2-70b-hf": _llama(80, 8192, 64, 8, 28672, 32000),
    "Llama-2-7b-hf": _llama(32, 4096, 32, 32, 11008, 32000),
    "Llama-3-70B": _llama(80, 8192, 64, 8, 28672, 128256),
    "Llama-3-8B": _llama(32, 4096, 32, 8, 14336, 128256),
    "Llama-3.1-405B": _llama(126, 16384, 128, 8, 53248, 128256),
    "Llama-3.1-70B": _llama(80, 8192, 64, 8, 28672, 128256),
    "Llama-3.1-8B": _llama(32, 4096, 32, 8, 14336, 128256),
    "Llama-3.2-1B": _llama(16, 2048, 32, 8, 8192, 128256),
    "Llama-3.2-3B": _llama(28, 3072, 24, 8, 8192, 128256),
    "Llama-3.3-70B-Instruct": _llama(80, 8192, 64, 8, 28672, 128256),
    "micro-llama-300M": _llama(12, 1024, 16, 4, 5632, 32000),
    "Mistral-7B-v0.1": _llama(32, 4096, 32, 8, 14336, 32000),
    "phi-2": _neox(32, 2560, 32, 32, 10240, 51200, shared_attention_norm=True, lm_head_bias=True),
    "Phi-3-mini-4k-instruct": _llama(32, 3072, 32, 32, 8192, 32064),
    "pythia-1.4b": _neox(24, 2048, 16, 16, 8192, 50304),
    "pythia-12b": _neox(36, 5120, 40, 40, 20480, 50688),
    "pythia-14m": _neox(6, 128, 4, 4, 512, 50304),
    "pythia-160m": _neox(12, 768, 12, 12, 3072, 50304),
    "pythia-1b": _neox(16, 2048, 8, 8, 8192, 50304),
    "pythia-2.8b": _neox(32, 2560, 32, 32, 10240, 50304),
    "pythia-31m": _neox(6, 256, 8, 8, 1024, 50304),
    "pythia-410m": _neox(24, 1024, 16, 16, 4096, 50304),
    "pythia-6.9b": _neox(32, 4096, 32, 32, 16384, 50432),
    "pythia-70m": _neox(6, 512, 8, 8, 2048, 50304),
    "Qwen2.5-0.5B": _llama(24, 896, 14, 2, 4864, 151936, attn_bias=True),
    "Qwen2.5-1.5B": _llama(28, 1536, 12, 2, 8960, 151936, attn_bias=True),
    "Qwen2.5-14B": _llama(48, 5120, 40, 8, 13824, 152064, attn_bias=True),
    "Qwen2.5-32B": _llama(64, 5120, 40, 8, 27648, 152064, attn_bias=True),
    "Qwen2.5-3B": _llama(36, 2048, 16, 2, 11008, 151936, attn_bias=True),
    "Qwen2.5-72B": _llama(80, 8192, 64, 8, 29568, 152064, attn_bias=True),
    "Qwen2.5-7B": _llama(28, 3584, 28, 4, 18944, 152064, attn_bias=True),
    "SmolLM2-1.7B": _llama(24, 2048, 32, 32, 8192, 49152),
    "SmolLM2-135M": _llama(30, 576, 9, 3, 1536, 49152),
    "SmolLM2-360M": _llama(32, 960, 15, 5, 2560, 49152),
    "tiny-llama-1.1b": _llama(22, 2048, 32, 4, 5632, 32000),
}


def from_mapping(data: dict, where: str, near: Path) -> NamedModel | None:
    """The model a litgpt config trains; None when it names none."""
    carried = data.get("model_config")
    if isinstance(carried, dict):
        return shaped(carried, f"{where}: model_config", where)
    name = data.get("model_name")
    if isinstance(name, str) and name:
        return by_name(name, f"{where}: model_name {name}")
    folder = data.get("checkpoint_dir")
    if isinstance(folder, str) and folder:
        return from_checkpoint(
            Path(folder) if Path(folder).is_absolute() else near / folder, folder, where
        )
    return None


def by_name(name: str, named: str) -> NamedModel:
    """One of litgpt's configs by name."""
    config = BY_KEY.get(_key(name))
    if config is None:
        return NamedModel(
            named,
            None,
            None,
            None,
            f"{name} is not one of the litgpt configs batchspec knows; write its model_config "
            "in the file, or give --model-config",
        )
    return shaped(config | {"name": name}, named, f"litgpt's config {name}")


def from_checkpoint(folder: Path, given: str, where: str) -> NamedModel:
    """A finetune's model: its checkpoint folder's ``model_config.yaml``, as litgpt reads it."""
    named = f"{where}: checkpoint_dir {given}"
    path = folder / "model_config.yaml"
    if not path.is_file():
        return NamedModel(
            named,
            None,
            None,
            None,
            f"{path} is not here (litgpt reads the model from it); run where the checkpoint is, "
            "or give --model-config",
        )
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return NamedModel(named, str(path), None, None, f"{path} does not read ({exc})")
    if not isinstance(config, dict):
        return NamedModel(named, str(path), None, None, f"{path} is not a mapping of Config fields")
    return shaped(config, named, str(path))


def shaped(config: dict, named: str, source: str) -> NamedModel:
    """The shape of litgpt's ``Config(**config)``; unknown where it cannot be counted."""
    model = shape(config)
    if isinstance(model, str):
        return NamedModel(named, None, None, None, f"{model}; give --model-config")
    name = config.get("name")
    return NamedModel(named, source, f"GPT ({name or 'litgpt model_config'})", model)


def shape(config: dict) -> Model | str:
    """litgpt's ``Config`` of ``config`` (its defaults where unset, its derived sizes) as
    batchspec's shape, or why it is not one."""
    c = DEFAULTS | {k: v for k, v in config.items() if v is not None}
    sizes = ("n_layer", "n_embd", "n_head", "vocab_size", "padding_multiple")
    wrong = [k for k in sizes if not _count(c[k])]
    if wrong:
        return f"model_config {', '.join(wrong)} not a positive integer"
    embd, heads = c["n_embd"], c["n_head"]
    mlp, norm, bias = c["mlp_class_name"], c["norm_class_name"], bool(c["bias"])
    if mlp not in (*GATED, "GptNeoxMLP") or c.get("n_expert") or c.get("latent_attention"):
        return (
            f"litgpt's {mlp} model with experts or latent attention is not a shape batchspec counts"
        )
    if (norm == "LayerNorm") != bias:
        return f"a {norm} with bias: {bias} is not a shape batchspec counts"
    ffn = c.get("intermediate_size")
    if ffn is None and mlp in GATED:
        return f"{mlp} needs intermediate_size (litgpt: needs to set the `intermediate_size`)"
    vocab = (
        c.get("padded_vocab_size")
        or -(-c["vocab_size"] // c["padding_multiple"]) * c["padding_multiple"]
    )
    head = c.get("head_size") or embd // heads
    for key, value in (
        ("intermediate_size", ffn),
        ("n_query_groups", c.get("n_query_groups")),
        ("head_size", head),
    ):
        if value is not None and not _count(value):
            return f"model_config {key} is {value!r}, not a positive integer"
    return Model(
        name=str(c.get("name") or "litgpt"),
        layers=c["n_layer"],
        hidden=embd,
        heads=heads,
        kv_heads=c.get("n_query_groups") or heads,
        ffn=ffn or 4 * embd,
        vocab=vocab,
        gated=mlp in GATED,
        tied=False,
        biases=bias,
        head_dim=0 if head * heads == embd else head,
        qkv_bias=bool(c.get("attn_bias")) and not bias,
        qk_norm=bool(c.get("norm_qk")),
        layer_norms=_norms(c),
        head_bias=bool(c.get("lm_head_bias")),
    )


def config_fields(shape: Model) -> dict:
    """litgpt's ``Config`` fields of ``shape``: a Llama-style shape as ``LLaMAMLP`` and
    ``RMSNorm`` without biases, a GPT-style one as litgpt's defaults, ``GptNeoxMLP`` and
    ``LayerNorm`` with biases. litgpt's ``GPT`` never ties its head, so a tied shape is untied
    (its count grows by the head)."""
    config: dict[str, object] = {
        "vocab_size": shape.vocab,
        "padded_vocab_size": shape.vocab,
        "n_layer": shape.layers,
        "n_head": shape.heads,
        "n_embd": shape.hidden,
        "n_query_groups": shape.kv_heads,
        "intermediate_size": shape.ffn,
        "head_size": shape.head_dim or shape.hidden // shape.heads,
        "bias": shape.biases,
        "attn_bias": shape.qkv_bias,
        "norm_qk": shape.qk_norm,
        "lm_head_bias": shape.head_bias,
    }
    if shape.layer_norms == 1:
        config["shared_attention_norm"] = True
    if shape.layer_norms == 4:
        config |= {"post_attention_norm": True, "post_mlp_norm": True}
    if shape.gated:
        config |= {"mlp_class_name": "LLaMAMLP", "norm_class_name": "RMSNorm"}
        config |= {"parallel_residual": False, "rotary_percentage": 1.0}
    return config


def _norms(c: dict) -> int:
    """Norms a block holds: before attention and (unless shared) before the MLP, and any
    after either."""
    before = 1 if c.get("shared_attention_norm") or c.get("norm_2") is False else 2
    return before + bool(c.get("post_attention_norm")) + bool(c.get("post_mlp_norm"))


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _key(name: str) -> str:
    key = name.lower()
    for tune in TUNES:
        key = key.replace(tune, "")
    return key


#: :data:`CONFIGS` by a name's key (its case and tune endings left out).
BY_KEY = {_key(name): config for name, config in CONFIGS.items()}


def named_model(reading: Reading) -> NamedModel | None:
    """The model a litgpt reading names: its config's own way (:func:`from_mapping`, a job's
    config with the command line's overrides), else the general reading."""
    return resolve(reading, own=from_mapping)


#: The template's model values where the file names no model.
NO_MODEL: dict = {"model_name": None, "model_config": None, "model_lines": []}


def model_context(spec: BatchSpec, named: NamedModel | None) -> tuple[dict, list[Finding]]:
    """The rendered file's ``model_name`` (the litgpt config of the source's shape) or, where
    none has it, its ``model_config`` (:func:`as_model_config`); neither, saying why, for a
    model not known. litgpt never ties its head: a tied source is trained untied, as litgpt
    trains its own tied models."""
    if named is None:
        return NO_MODEL, []
    source = source_model(named)
    if named.model is None:
        said = f"litgpt.yaml names no model: the source's model is not known, {source}"
        hint = "set model_name or model_config in your litgpt config"
        return NO_MODEL, [finding("model-not-matched", said, hint=hint)]
    untied = dataclasses.replace(named.model, tied=False)
    untie = "; litgpt unties its head (its GPT never ties)" if named.model.tied else ""
    match = nearest(untied, {name: _config_shape(name) for name in CONFIGS})
    assert match is not None  # CONFIGS is not empty
    if not match.exact:
        return as_model_config(untied, source + untie, match.name, match.differences)
    same = f" (the same shape: {', '.join(match.same)})" if match.same else ""
    said = f"litgpt.yaml trains model_name {match.name}{same}, the source's model: {source}"
    lines = comment_lines(f"The source's model is {match.name}'s shape{same}: {source}.")
    carried = {"model_name": match.name, "model_lines": lines}
    return NO_MODEL | carried, [finding("model-carried", said + untie)]


def as_model_config(
    untied: Model, source: str, nearest_name: str, differ: list[str]
) -> tuple[dict, list[Finding]]:
    """The file's ``model_config`` for a shape no litgpt config has (:func:`config_fields`,
    which must read back as that shape; else none, saying why), the nearest config named."""
    config = {"name": f"batchspec-{untied.name}"} | config_fields(untied)
    built = shape(config)
    wrong = built if isinstance(built, str) else "; ".join(differences(untied, built, "litgpt"))
    if wrong:
        said = (
            "litgpt.yaml names no model: batchspec cannot write the source's model as litgpt's "
            f"model_config, {source} ({wrong})"
        )
        return NO_MODEL, [finding("model-not-matched", said)]
    said = (
        f"litgpt.yaml carries the source's model as model_config (no litgpt config has its "
        f"shape; the nearest, {nearest_name}, differs: {'; '.join(differ)}): {source}"
    )
    lines = comment_lines(f"The source's model, as litgpt's Config: {source}.")
    written = {"model_config": list(config.items()), "model_lines": lines}
    return NO_MODEL | written, [finding("model-carried", said)]


def _config_shape(name: str) -> Model:
    """The shape of litgpt's config ``name`` (one of :data:`CONFIGS`)."""
    found = shape(CONFIGS[name] | {"name": name})
    assert isinstance(found, Model), found
    return found
