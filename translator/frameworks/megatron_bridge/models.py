"""The model a Megatron-Bridge or NeMo job names, read without torch.

- **Megatron-Bridge**: the recipe (``run_recipe.py --recipe llama32_1b_pretrain_config``) builds
  its model from the Hugging Face model it names (``AutoBridge.from_hf_pretrained(
  "meta-llama/Llama-3.2-1B").get_model_config()`` in ``recipes/llama/h100/llama3.py``): the shape
  of that model's published ``config.json`` (:data:`RECIPES`), then the ``model.*`` fields the
  file or the overrides set over it (megatron-core's ``TransformerConfig`` names:
  ``model.num_layers=4``). Its vocabulary stays the recipe's unless
  ``tokenizer.use_tokenizer_vocab_size`` hands it to the tokenizer (unknown then). With no recipe
  named (an override file on its own), every field of the shape must be written: one left out is
  the recipe's, unknown.
- **NeMo 1** (``megatron_gpt_config.yaml``, a whole config): the ``model`` block with NeMo's
  defaults (``bias: true``, ``activation: gelu``, ``normalization: layernorm``, learned
  positions, a tied head); the vocabulary is the tokenizer's, known only for Megatron's GPT-2 BPE
  (50,257 tokens, padded to a multiple of ``make_vocab_size_divisible_by`` × TP as NeMo pads it).
- **NeMo 2**: its model is a Python config class of NeMo's (``Llama3Config8B``), and its Llama
  classes take the vocabulary from the tokenizer; not read: unknown, naming what to give.
"""

from __future__ import annotations

import re

from translator.frameworks.megatron_bridge import rules
from translator.model.memory import Model, experts_in, hf_shape
from translator.model.model_split import ModelParts
from translator.model.named_model import NamedModel
from translator.reading import Reading

#: What to give for a model that does not resolve.
GIVE = "give --model-config with its config.json"


def _published(hub: str, kind: str, sizes: tuple[int, ...], tied: bool, head_dim: int = 0):
    """``(hub name, shape)`` of a model's published ``config.json``: ``sizes`` are its layers,
    width, heads, key/value heads, MLP width and vocabulary."""
    layers, hidden, heads, kv, ffn, vocab = sizes
    config = {
        "model_type": kind,
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": ffn,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        **({"head_dim": head_dim} if head_dim else {}),
    }
    return hub, hf_shape(config, hub, hub)


_LLAMA3 = 128256
#: Megatron-Bridge's recipes (the name's model part) -> the Hugging Face model each loads with
#: ``AutoBridge.from_hf_pretrained`` and that model's shape (its published ``config.json``).
RECIPES = {
    "llama32_1b": _published("meta-llama/Llama-3.2-1B", "llama", (16, 2048, 32, 8, 8192, _LLAMA3), True),
    "llama32_3b": _published("meta-llama/Llama-3.2-3B", "llama", (28, 3072, 24, 8, 8192, _LLAMA3), True),
    "llama3_8b": _published("meta-llama/Meta-Llama-3-8B", "llama", (32, 4096, 32, 8, 14336, _LLAMA3), False),
    "llama31_8b": _published("meta-llama/Meta-Llama-3.1-8B", "llama", (32, 4096, 32, 8, 14336, _LLAMA3), False),
    "llama3_70b": _published("meta-llama/Meta-Llama-3-70B", "llama", (80, 8192, 64, 8, 28672, _LLAMA3), False),
    "llama31_70b": _published("meta-llama/Meta-Llama-3.1-70B", "llama", (80, 8192, 64, 8, 28672, _LLAMA3), False),
    "llama31_405b": _published("meta-llama/Meta-Llama-3.1-405B", "llama", (126, 16384, 128, 8, 53248, _LLAMA3), False),
    "llama2_7b": _published("meta-llama/Llama-2-7b-hf", "llama", (32, 4096, 32, 32, 11008, 32000), False),
    "qwen2_500m": _published("Qwen/Qwen2-0.5B", "qwen2", (24, 896, 14, 2, 4864, 151936), True),
    "qwen2_1p5b": _published("Qwen/Qwen2-1.5B", "qwen2", (28, 1536, 12, 2, 8960, 151936), True),
    "qwen2_7b": _published("Qwen/Qwen2-7B", "qwen2", (28, 3584, 28, 4, 18944, 152064), False),
    "qwen2_72b": _published("Qwen/Qwen2-72B", "qwen2", (80, 8192, 64, 8, 29568, 152064), False),
    "qwen25_500m": _published("Qwen/Qwen2.5-0.5B", "qwen2", (24, 896, 14, 2, 4864, 151936), True),
    "qwen25_1p5b": _published("Qwen/Qwen2.5-1.5B", "qwen2", (28, 1536, 12, 2, 8960, 151936), True),
    "qwen25_7b": _published("Qwen/Qwen2.5-7B", "qwen2", (28, 3584, 28, 4, 18944, 152064), False),
    "qwen25_14b": _published("Qwen/Qwen2.5-14B", "qwen2", (48, 5120, 40, 8, 13824, 152064), False),
    "qwen25_32b": _published("Qwen/Qwen2.5-32B", "qwen2", (64, 5120, 40, 8, 27648, 152064), False),
    "qwen25_72b": _published("Qwen/Qwen2.5-72B", "qwen2", (80, 8192, 64, 8, 29568, 152064), False),
    "qwen3_600m": _published("Qwen/Qwen3-0.6B", "qwen3", (28, 1024, 16, 8, 3072, 151936), True, 128),
    "qwen3_1p7b": _published("Qwen/Qwen3-1.7B", "qwen3", (28, 2048, 16, 8, 6144, 151936), True, 128),
    "qwen3_4b": _published("Qwen/Qwen3-4B", "qwen3", (36, 2560, 32, 8, 9728, 151936), True, 128),
    "qwen3_8b": _published("Qwen/Qwen3-8B", "qwen3", (36, 4096, 32, 8, 12288, 151936), False, 128),
    "qwen3_14b": _published("Qwen/Qwen3-14B", "qwen3", (40, 5120, 40, 8, 17408, 151936), False, 128),
    "qwen3_32b": _published("Qwen/Qwen3-32B", "qwen3", (64, 5120, 64, 8, 25600, 151936), False, 128),
}  # fmt: skip
#: The fields of a shape an override file must write when it names no recipe.
WHOLE = rules.MCORE_SHAPE
#: NeMo 1's activations with a gate (three MLP matrices).
GATED = {"swiglu", "fast-swiglu", "geglu", "fast-geglu", "reglu", "fast-reglu"}
#: NeMo 1's norms, as megatron-core names them.
NORMS = {"layernorm": "LayerNorm", "layernorm1p": "LayerNorm", "rmsnorm": "RMSNorm"}
#: Megatron's GPT-2 BPE vocabulary (gpt2-vocab.json), before padding.
GPT2_VOCAB = 50257


class UnknownShape(Exception):
    """Why the shape is unknown (its text), with what is known of its split."""


def named_model(reading: Reading) -> NamedModel:
    """The model a Megatron-Bridge or NeMo reading names, resolved or unknown with why."""
    gen = rules.generation(reading)
    if gen is rules.NEMO2:
        factory = reading.values.get(rules.FACTORY)
        named = f"{reading.path}: NeMo 2 recipe" + (f" {factory.value}" if factory else "")
        why = (
            "NeMo 2's model is a Python config class of NeMo's (its Llama classes take the "
            f"vocabulary from the tokenizer), not read here; {GIVE}"
        )
        return NamedModel(named, None, None, None, why, names=factory is not None)
    fields = _given(reading)
    if gen is rules.NEMO1 and not any(k in fields for k in WHOLE):
        why = f"its model block gives no shape (model.num_layers, model.hidden_size...); {GIVE}"
        return NamedModel(f"{reading.path}: NeMo 1 model block", None, None, None, why, names=False)
    if gen is rules.NEMO1:
        tensor = reading.values.get("model.tensor_model_parallel_size")
        fields["tensor_model_parallel_size"] = 1 if tensor is None else tensor.value
        return _resolved(f"{reading.path}: NeMo 1 model block", fields, _nemo1, "GPT (NeMo 1)")
    recipe = reading.values.get("--recipe")
    if recipe is not None:
        return _from_recipe(reading, str(recipe.value), fields)
    if not any(k in fields for k in WHOLE):
        why = (
            "it names no recipe and writes no model: the model is the recipe's that runs it "
            f"(run_recipe.py --recipe, the script given --config-file); {GIVE}"
        )
        return NamedModel(f"{reading.path}: no model", None, None, None, why, names=False)
    return _resolved(f"{reading.path}: model block", fields, _whole, "GPT (model block)")


def _given(reading: Reading) -> dict:
    """The shape fields the reading sets (``model.`` dropped); one it cannot read is refused
    with why."""
    out: dict[str, object] = {}
    for key in rules.SHAPE:
        v = reading.values.get(f"model.{key}")
        if v is None:
            continue
        if v.why_unknown is not None:
            out[key] = UnknownShape(f"model.{key} is {v.why_unknown}")
        else:
            out[key] = v.value
    return out


def _resolved(named: str, fields: dict, shape, architecture: str) -> NamedModel:
    try:
        model = shape(fields, named)
    except UnknownShape as exc:
        return NamedModel(named, None, None, None, f"{exc}; {GIVE}", _parts(fields, named))
    return NamedModel(named, named, architecture, model)


def _from_recipe(reading: Reading, recipe: str, fields: dict) -> NamedModel:
    """A recipe's model with the file's and the overrides' fields over it."""
    named = f"{reading.path}: recipe {recipe}"
    found = next(
        (k for k in sorted(RECIPES, key=len, reverse=True) if re.match(rf"{k}(_|$)", recipe)),
        None,
    )
    if found is None:
        why = f"{recipe} is not a recipe whose model batchspec knows; {GIVE}"
        return NamedModel(named, None, None, None, why, _parts(fields, named))
    hub, base = RECIPES[found]
    switch = reading.values.get(rules.TOKENIZER_VOCAB)
    if switch is not None and switch.value is True and "vocab_size" not in fields:
        why = f"{rules.TOKENIZER_VOCAB} is true: the vocabulary is the tokenizer's"
        fields = fields | {"vocab_size": UnknownShape(why)}
    source = f"{hub}'s config.json shape (the {found} recipe's AutoBridge model)"
    changed = f" with {', '.join(f'model.{k}' for k in fields)}" if fields else ""
    merged = _fields_of(base) | fields
    try:
        model = _whole(merged, named)
    except UnknownShape as exc:
        return NamedModel(named, None, None, None, f"{exc}; {GIVE}", _parts(merged, named))
    return NamedModel(named, source + changed, f"GPT ({hub})", model)


def _fields_of(m: Model) -> dict:
    """A shape as the TransformerConfig fields Megatron-Bridge's provider sets for it."""
    return {
        "num_layers": m.layers,
        "hidden_size": m.hidden,
        "num_attention_heads": m.heads,
        "num_query_groups": m.kv_heads,
        "ffn_hidden_size": m.ffn,
        "kv_channels": m.head_dim or m.hidden // m.heads,
        "vocab_size": m.vocab,
        "gated_linear_unit": m.gated,
        "normalization": "LayerNorm" if m.biases else "RMSNorm",
        "add_bias_linear": m.biases,
        "add_qkv_bias": m.biases or m.qkv_bias,
        "qk_layernorm": m.qk_norm,
        "share_embeddings_and_output_weights": m.tied,
        "position_embedding_type": "learned_absolute" if m.positions else "rope",
        **({"seq_length": m.positions} if m.positions else {}),
    }


def _whole(fields: dict, named: str) -> Model:
    """The shape of megatron-core's fields, every one given (an :class:`UnknownShape` says why
    one is not)."""
    missing = [k for k in WHOLE if k not in fields]
    if missing:
        raise UnknownShape(
            f"it names no recipe and does not write {', '.join(f'model.{k}' for k in missing)}"
            " (an override file's missing fields are the recipe's)"
        )
    return _shape(fields, named)


def _shape(f: dict, named: str) -> Model:
    for value in f.values():
        if isinstance(value, UnknownShape):
            raise value
    _refuse_experts(f)
    count = {k: _count(f, k) for k in ("num_layers", "hidden_size", "num_attention_heads")}
    layers, hidden, heads = count.values()
    norm, biases = f["normalization"], _switch(f, "add_bias_linear")
    if norm not in ("LayerNorm", "RMSNorm"):
        raise UnknownShape(f"model.normalization is {norm!r}, not LayerNorm or RMSNorm")
    if (norm == "LayerNorm") != biases:
        raise UnknownShape(
            f"{norm} with add_bias_linear {biases}: batchspec counts LayerNorm with biases or "
            "RMSNorm without"
        )
    learned = f["position_embedding_type"] == "learned_absolute"
    if f["position_embedding_type"] not in ("learned_absolute", "rope"):
        raise UnknownShape(f"model.position_embedding_type is {f['position_embedding_type']!r}")
    head_dim = _count(f, "kv_channels") if f["kv_channels"] is not None else hidden // heads
    return Model(
        name=named,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=heads if f["num_query_groups"] is None else _count(f, "num_query_groups"),
        ffn=4 * hidden if f["ffn_hidden_size"] is None else _count(f, "ffn_hidden_size"),
        vocab=_count(f, "vocab_size"),
        gated=_switch(f, "gated_linear_unit"),
        tied=_switch(f, "share_embeddings_and_output_weights"),
        positions=_count(f, "seq_length") if learned else 0,
        biases=biases,
        head_dim=0 if head_dim * heads == hidden else head_dim,
        qkv_bias=not biases and _switch(f, "add_qkv_bias"),
        qk_norm=_switch(f, "qk_layernorm"),
    )


def _nemo1(given: dict, named: str) -> Model:
    """NeMo 1's model block: its defaults for what it leaves out, the vocabulary its tokenizer's."""
    missing = [
        f"model.{k}"
        for k in ("num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size")
        if k not in given
    ]
    if missing:
        raise UnknownShape(f"{', '.join(missing)} not written (NeMo 1 has no default)")
    _refuse_experts(given)
    if given.get("hyena") is not None:
        raise UnknownShape(
            "model.hyena: its layers are Hyena operators, which batchspec does not count"
        )
    library, kind = given.get("tokenizer.library"), given.get("tokenizer.type")
    if (library, kind) != ("megatron", "GPT2BPETokenizer"):
        raise UnknownShape(f"the vocabulary is the tokenizer's ({library} {kind})")
    divisible = given.get("make_vocab_size_divisible_by", 128)
    tensor = given["tensor_model_parallel_size"]
    multiple = _number(divisible, "model.make_vocab_size_divisible_by") * _number(
        tensor, "model.tensor_model_parallel_size"
    )
    activation, norm = given.get("activation", "gelu"), given.get("normalization", "layernorm")
    if norm not in NORMS:
        raise UnknownShape(f"model.normalization is {norm!r}")
    bias = given.get("bias", True)
    fields = {
        "num_query_groups": None,
        "kv_channels": None,
        "share_embeddings_and_output_weights": True,
        "position_embedding_type": "learned_absolute",
        "add_qkv_bias": bias,
        "qk_layernorm": False,
        **{k: v for k, v in given.items() if k in WHOLE},
        "vocab_size": -(-GPT2_VOCAB // multiple) * multiple,
        "gated_linear_unit": activation in GATED,
        "normalization": NORMS[norm],
        "add_bias_linear": bias,
        "seq_length": given.get("max_position_embeddings"),
    }
    return _shape(fields, named)


def _refuse_experts(f: dict) -> None:
    experts = experts_in(f)
    if experts is not None:
        raise UnknownShape(
            f"model.{experts}: a mixture of experts, which batchspec does not count (its "
            "experts, router and expert-parallel split)"
        )


def _count(f: dict, key: str) -> int:
    return _number(f.get(key), f"model.{key}")


def _number(value: object, key: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UnknownShape(f"{key} is {value!r}, not a positive integer")
    return value


def _switch(f: dict, key: str) -> bool:
    value = f[key]
    if not isinstance(value, bool):
        raise UnknownShape(f"model.{key} is {value!r}, not true or false")
    return value


def _parts(fields: dict, named: str) -> ModelParts | None:
    """The layers and heads the fields fix, for the split checks of a model not resolved."""

    def known(key: str) -> int | None:
        value = fields.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    heads = known("num_attention_heads")
    if known("num_layers") is None and heads is None:
        return None
    groups = known("num_query_groups") if "num_query_groups" in fields else heads
    return ModelParts(known("num_layers"), heads, groups, named)
