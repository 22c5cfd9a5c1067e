"""The model a Megatron launch carries in its flags (``--num-layers``, ``--hidden-size``...):
a GPT's shape with Megatron's defaults where a flag is left out (a 4h FFN, or with SwiGLU two
thirds of it rounded down to 64; tied embeddings; biases and LayerNorm; a learned absolute
position embedding of ``--max-position-embeddings`` rows), counted analytically. Flags given
as anything but numbers, a vocabulary left to the tokenizer, a position table of no given
size, or a mixture of experts leave it unknown with why (its layers and heads still
split-checked)."""

from __future__ import annotations

from translator.model.memory import Model, not_counted_moe
from translator.model.model_split import ModelParts
from translator.model.named_model import NamedModel, given_flags
from translator.reading import Reading

#: Megatron's flags for a GPT's shape.
MEGATRON = {
    "--num-layers": "layers",
    "--hidden-size": "hidden",
    "--num-attention-heads": "heads",
    "--num-query-groups": "kv_heads",
    "--num-key-value-heads": "kv_heads",  # Megatron-DeepSpeed's, grouped without a switch
    "--ffn-hidden-size": "ffn",
    "--vocab-size": "vocab",
    "--kv-channels": "head_dim",
    "--max-position-embeddings": "positions",
}
#: ``--position-embedding-type`` values that learn a table of ``--max-position-embeddings``
#: rows: megatron-core's default ``learned_absolute``, Megatron-DeepSpeed's ``absolute``.
LEARNED_POSITIONS = {"learned_absolute", "absolute"}
#: Values with no parameters of their own: rotary (megatron-core's rope, yarn and mrope,
#: Megatron-DeepSpeed's rotary), ALiBi, none.
NO_POSITION_TABLE = {"rope", "yarn", "mrope", "rotary", "alibi", "none"}


def named_model(reading: Reading) -> NamedModel | None:
    """The GPT Megatron's flags describe; None when they do not give its layers and width
    (a Hugging Face name it names, then, as any framework's)."""
    given = given_flags(reading)
    if "--num-layers" not in given or "--hidden-size" not in given:
        return None
    named = f"{reading.path}: Megatron flags"
    sizes = {}
    for flag, field in MEGATRON.items():
        number = given.get(flag)
        if number is not None and number.isdigit():
            sizes[field] = int(number)
    grouped = "--group-query-attention" in given or "--num-key-value-heads" in given
    heads = sizes.get("heads")
    partial = ModelParts(
        sizes.get("layers"), heads, sizes.get("kv_heads", heads) if grouped else heads, named
    )
    why = _unknown(given, sizes, named)
    if why is not None:
        return NamedModel(named, None, None, None, why, partial)
    return NamedModel(named, named, "GPT (Megatron flags)", _shape(given, sizes, grouped))


def _unknown(given: dict[str, str | None], sizes: dict[str, int], named: str) -> str | None:
    """Why the flags do not give the whole count, else None."""
    missing = [
        f
        for f in ("--num-layers", "--hidden-size", "--num-attention-heads", "--vocab-size")
        if MEGATRON[f] not in sizes
    ]
    if missing:
        return (
            f"{', '.join(missing)} not given as numbers (the vocabulary may come from the "
            "tokenizer); give --model-config"
        )
    experts = given.get("--num-experts")
    if experts is not None and experts.isdigit() and int(experts) > 1:
        return not_counted_moe(named, f"--num-experts {experts}")
    kind = _position_type(given)
    if kind in LEARNED_POSITIONS and "positions" not in sizes:
        return (
            "--max-position-embeddings not given as a number: the rows of the learned position "
            f"embedding ({kind}, Megatron's default without --position-embedding-type rope); "
            "give --model-config"
        )
    if kind not in LEARNED_POSITIONS | NO_POSITION_TABLE:
        return f"--position-embedding-type {kind}: not counted; give --model-config"
    norm = given.get("--normalization") or "LayerNorm"
    if (norm == "LayerNorm") == ("--disable-bias-linear" in given):
        return (
            f"--normalization {norm} with{'' if norm == 'LayerNorm' else 'out'} "
            "--disable-bias-linear: batchspec counts LayerNorm with biases or RMSNorm without; "
            "give --model-config"
        )
    return None


def _position_type(given: dict[str, str | None]) -> str:
    """The position embedding the flags ask for: megatron-core's default learned absolute
    table unless ``--position-embedding-type`` or the legacy rotary switch says otherwise."""
    if "--use-rotary-position-embeddings" in given:
        return "rope"
    return given.get("--position-embedding-type") or "learned_absolute"


def _shape(given: dict[str, str | None], sizes: dict[str, int], grouped: bool) -> Model:
    """The shape of flags that give it whole (:func:`_unknown` found nothing missing)."""
    gated = "--swiglu" in given
    hidden, heads = sizes["hidden"], sizes["heads"]
    biases = "--disable-bias-linear" not in given
    head_dim = sizes.get("head_dim", hidden // heads)
    return Model(
        name="megatron",
        layers=sizes["layers"],
        hidden=hidden,
        heads=heads,
        kv_heads=sizes.get("kv_heads", heads) if grouped else heads,
        # Megatron's defaults: 4h, or with SwiGLU two thirds of it rounded down to 64.
        ffn=sizes.get("ffn", (4 * hidden * 2 // 3) // 64 * 64 if gated else 4 * hidden),
        vocab=sizes["vocab"],
        gated=gated,
        tied="--untie-embeddings-and-output-weights" not in given,
        positions=sizes["positions"] if _position_type(given) in LEARNED_POSITIONS else 0,
        biases=biases,
        head_dim=0 if head_dim * heads == hidden else head_dim,
        qkv_bias=not biases and "--add-qkv-bias" in given,
        qk_norm="--qk-layernorm" in given,
    )
