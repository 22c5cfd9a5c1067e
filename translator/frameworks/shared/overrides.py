"""Where a launch script writes the value of a ``key=value`` override (Hydra, OmegaConf,
Fire, jsonargparse: LLaMA-Factory, Megatron-Bridge, torchtune and others take them), so
``update`` can rewrite that value and keep every other byte."""

from __future__ import annotations

from translator.reading import Call
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
