"""``key=value`` overrides of a launch line (Hydra, OmegaConf, Fire, jsonargparse:
LLaMA-Factory, Megatron-Bridge, torchtune and others take them): where the script writes each
value, so ``update`` can rewrite it and keep every other byte, and what an override word whose
text is not known still tells."""

from __future__ import annotations

from collections.abc import Container

import yaml

from translator.reading import Call, Reading
from translator.shell.values import Word


def value_span(word: Word, raw: str, call: Call) -> tuple[int, int] | None:
    """The span of ``raw``, the value part of ``word``, where the script writes it as one
    literal: the end of the word's own literal, or the literal of the one variable it comes
    from (``key=$N``); None when it is written nowhere as one literal."""
    text = call.text
    if word.span is not None and text[word.span[0] : word.span[1]] == word.text:
        return word.span[1] - len(raw), word.span[1]
    sources = [s for s in word.sources if s[0] >= 0 and text[s[0] : s[1]] == raw]
    return sources[0] if len(sources) == 1 and raw else None


def unknown_key(reading: Reading, word: Word, read: Container[str]) -> str | None:
    """For an override ``word`` whose text is not known: its key when the word is ``key=$X``
    with ``key`` among ``read`` (the caller sets that key unknown); a word that is no
    ``key=`` at all (``$EXTRA_OVERRIDES``) may hold any overrides, and is noted in
    ``reading.opaque``."""
    head = word.parts[0].text if word.parts and word.parts[0].text else ""
    key = head.split("=", 1)[0] if "=" in head else None
    if key is None and not getattr(word, "absent", False):
        reading.opaque.append(f"line {word.line}: {word.why_unknown}")
    return key if key in read else None


def yaml_value(raw: str, nulls: Container[str] = ()) -> object:
    """An override's value as OmegaConf reads it (YAML): ``5`` is a number, ``true`` a bool;
    a text YAML refuses stays the text. ``nulls``: words the framework itself takes as null
    (torchtune's ``None``)."""
    if raw in nulls:
        return None
    try:
        return yaml.safe_load(raw) if raw else raw
    except yaml.YAMLError:
        return raw
