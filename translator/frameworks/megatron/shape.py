"""The model a Megatron launch carries in its flags (``--num-layers``, ``--hidden-size``...):
a GPT's shape with Megatron's defaults where a flag is left out (a 4h FFN, or with SwiGLU two
thirds of it rounded down to 64; tied embeddings; biases), counted analytically. Flags given
as anything but numbers, a vocabulary left to the tokenizer, or a mixture of experts leave it
unknown with why (its layers and heads still split-checked)."""

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
}


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
    missing = [
        f
        for f in ("--num-layers", "--hidden-size", "--num-attention-heads", "--vocab-size")
        if MEGATRON[f] not in sizes
    ]
    if missing:
        return NamedModel(
            named,
            None,
            None,
            None,
            f"{', '.join(missing)} not given as numbers (the vocabulary may come from the "
            "tokenizer); give --model-config",
            partial,
        )
    experts = given.get("--num-experts")
    if experts is not None and experts.isdigit() and int(experts) > 1:
        return NamedModel(
            named, None, None, None, not_counted_moe(named, f"--num-experts {experts}"), partial
        )
    gated = "--swiglu" in given
    hidden = sizes["hidden"]
    model = Model(
        name="megatron",
        layers=sizes["layers"],
        hidden=hidden,
        heads=sizes["heads"],
        kv_heads=sizes.get("kv_heads", sizes["heads"]) if grouped else sizes["heads"],
        # Megatron's defaults: 4h, or with SwiGLU two thirds of it rounded down to 64.
        ffn=sizes.get("ffn", (4 * hidden * 2 // 3) // 64 * 64 if gated else 4 * hidden),
        vocab=sizes["vocab"],
        gated=gated,
        tied="--untie-embeddings-and-output-weights" not in given,
        biases="--disable-bias-linear" not in given,
    )
    return NamedModel(named, named, "GPT (Megatron flags)", model)
