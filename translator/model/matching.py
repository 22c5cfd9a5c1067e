"""A model's shape against the models a framework names (torchtitan's config functions, litgpt's
configs): which one builds exactly that shape, or the nearest and how it differs, in words.
``convert`` uses it to carry the model a job trains into another framework's file."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from translator.model.memory import Model
from translator.model.named_model import NamedModel

#: What each of :class:`Model`'s fields is called in a sentence (a field missing here: its name).
LABELS = {
    "layers": "layers",
    "hidden": "hidden size",
    "heads": "attention heads",
    "kv_heads": "key/value heads",
    "ffn": "FFN width",
    "vocab": "vocabulary",
    "gated": "a SwiGLU MLP",
    "tied": "tied embeddings",
    "positions": "learned positions",
    "biases": "biases",
    "head_dim": "head width",
    "qkv_bias": "query/key/value biases",
    "out_bias": "an attention output bias",
    "mlp_bias": "MLP biases",
    "qk_norm": "query/key norms",
    "layer_norms": "norms per layer",
    "head_bias": "an output-head bias",
}


@dataclass(frozen=True)
class Match:
    """The framework's model nearest a shape."""

    name: str
    """Its name in the framework (``llama3_8b``, ``Llama-3-8B``)."""
    differences: list[str]
    """How the shape differs from it, in words; empty: it builds exactly that shape."""
    same: list[str]
    """The other names of the framework that build the same shape as this one."""

    @property
    def exact(self) -> bool:
        return not self.differences


def differences(shape: Model, other: Model, other_name: str) -> list[str]:
    """How ``shape`` differs from ``other`` (called ``other_name``), a phrase a field: ``key/value
    heads 32 where llama3_8b has 8``, ``biases where llama3_8b has none``. The names differ
    without counting."""
    out = []
    for field in dataclasses.fields(Model):
        mine, theirs = getattr(shape, field.name), getattr(other, field.name)
        if field.name == "name" or mine == theirs:
            continue
        label = LABELS.get(field.name, field.name)
        if isinstance(mine, bool):
            out.append(f"{label} where {other_name} has none" if mine else f"no {label}")
        else:
            out.append(f"{label} {mine} where {other_name} has {theirs}")
    return out


def nearest(shape: Model, models: Mapping[str, Model]) -> Match | None:
    """The model of ``models`` (name -> shape, in the framework's order of preference) that
    builds ``shape``, else the one that differs in the fewest fields (the parameter count
    nearest on a tie); None when ``models`` is empty."""
    if not models:
        return None
    ranked = sorted(
        models.items(),
        key=lambda item: (
            len(differences(shape, item[1], item[0])),
            abs(item[1].parameters - shape.parameters),
        ),
    )
    name, best = ranked[0]
    found = differences(shape, best, name)
    same = [n for n, m in ranked[1:] if not differences(best, m, n)] if not found else []
    return Match(name, found, same)


def described(shape: Model) -> str:
    """``shape`` in one line of words and numbers: ``32 layers, hidden size 4096, 32 attention
    heads (8 key/value), FFN width 14336 (SwiGLU), vocabulary 128256, untied, no biases,
    8,030,261,248 parameters``."""
    heads = f"{shape.heads} attention heads" + (
        f" ({shape.kv_heads} key/value)" if shape.kv_heads != shape.heads else ""
    )
    return ", ".join(
        [
            f"{shape.layers} layers",
            f"hidden size {shape.hidden}",
            heads,
            f"FFN width {shape.ffn}" + (" (SwiGLU)" if shape.gated else ""),
            f"vocabulary {shape.vocab}",
            "tied" if shape.tied else "untied",
            "biases" if shape.biases else "no biases",
            f"{shape.parameters:,} parameters",
        ]
    )


def source_model(named: NamedModel) -> str:
    """The model a source trains, for a sentence: where it is named, what it is (its
    architecture and :func:`described` shape), or why it is not known."""
    if named.model is None:
        return f"{named.named} (not known: {named.why})"
    return f"{named.named} ({named.architecture}: {described(named.model)})"
