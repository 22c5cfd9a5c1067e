"""Which framework a config file is for: by its extension, and by its content where several
frameworks claim the extension."""

from __future__ import annotations

from translator.plugin.contract import Framework
from translator.plugin.registry import FRAMEWORKS, by_claim_order
from translator.words import parsing
from translator.words.errors import InputError
from translator.words.files import suffix_of


def claimant(path: str, text: str) -> Framework | None:
    """The framework for a file: the only one that claims its extension; when several do (a
    YAML), the first of them to claim its content; with none, the first to claim its content.
    ``None`` when that leaves no framework: a YAML that none of the frameworks sharing ``.yaml``
    recognises (``foo: 1``) is not the first one's by default."""
    by_suffix = _by_suffix(path)
    if len(by_suffix) == 1:
        return by_suffix[0]
    return next((f for f in by_suffix or by_claim_order() if f.claims(text)), None)


def detect(path: str, text: str) -> Framework:
    """:func:`claimant`, or an input error that asks for ``--framework``. A file no framework
    claims that does not parse is refused with its parse error, and one that is no mapping (a
    JSON list) goes to the first framework of its extension, whose reader says what it must
    be: naming a framework would not help either."""
    found = claimant(path, text)
    if found is not None:
        return found
    by_suffix = _by_suffix(path)
    load = parsing.load_json if suffix_of(path) == ".json" else parsing.load_yaml
    if by_suffix and not isinstance(load(text, path).data, dict):
        return by_suffix[0]
    raise InputError(
        f"{path}: cannot tell which framework this config is for; "
        f"give --framework {'|'.join(FRAMEWORKS)}"
    )


def _by_suffix(path: str) -> list[Framework]:
    """The frameworks that claim the file's extension, in claim order."""
    suffix = suffix_of(path)
    return [f for f in by_claim_order() if suffix in f.extensions]
