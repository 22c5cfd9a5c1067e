"""Spec files (YAML or JSON, the keys of the resolved-spec output) and flag overrides -> BatchSpec.

Malformed input (not a mapping, unknown key, a string where a count belongs...) is an
:class:`InputError` (exit 2) naming the file and line; arithmetic that does not work out is a
:class:`ConfigError` (exit 1) from the solver.
"""

from __future__ import annotations

import difflib

from pydantic import ValidationError

from translator import parsing
from translator.errors import InputError
from translator.files import read_text
from translator.spec import BatchSpec, spec_fields

#: Keys that say the same thing (the world size); a flag for one replaces all of the file's.
WORLD_KEYS = {"world_size", "nodes", "gpus_per_node", "data_parallel_size"}
#: Keys of a ``plan --json`` output that are recomputed, so such an output is a valid spec.
DERIVED_KEYS = {"tokens_per_step", "findings", "options"}


def parse_mapping(text: str, where: str) -> tuple[dict, dict[str, int]]:
    """A YAML (or JSON) mapping from ``text`` and the line of each key; safe loading only.
    A key given twice is refused: which one was meant is anyone's guess."""
    doc = (parsing.load_json if where.endswith(".json") else parsing.load_yaml)(text, where)
    if not isinstance(doc.data, dict):
        raise InputError(
            f"{where}: expected a mapping of keys to values, got {type(doc.data).__name__}"
        )
    for dup in doc.duplicates:
        raise InputError(
            f"{where}:{dup.again}: {parsing.brief(dup.path)} is given twice "
            f"(lines {dup.first} and {dup.again}); keep one"
        )
    return doc.data, {key: line for key, (line, _) in doc.positions.items()}


def build_spec(values: dict, where: str, lines: dict[str, int] | None = None) -> BatchSpec:
    """Validate ``values`` as a BatchSpec; a field error becomes one line naming file and line."""
    if "global_batch_size" in values and "effective_batch_size" in values:
        raise InputError(
            f"{where}: give global_batch_size or its alias effective_batch_size, not both"
        )
    try:
        return BatchSpec(
            **{k: v for k, v in values.items() if k not in DERIVED_KEYS and v is not None}
        )
    except ValidationError as exc:
        raise InputError(describe(exc, where, lines or {})) from None


def describe(exc: ValidationError, where: str, lines: dict[str, int]) -> str:
    """One line for the first of pydantic's errors (and how many more there are)."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    key = ".".join(str(p) for p in first["loc"]) or "spec"
    top = str(first["loc"][0]) if first["loc"] else ""
    at = f"{where}:{lines[top]}" if top in lines else where
    if first["type"] == "extra_forbidden":
        close = difflib.get_close_matches(top, sorted(spec_fields()), n=1)
        shown = parsing.brief(key, quote="'")
        text = f"unknown key {shown}" + (f" (did you mean '{close[0]}'?)" if close else "")
    else:
        text = f"{parsing.brief(key, quote='')}: {first['msg']}"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{at}: {text}{more}"


def load_spec(path: str, overrides: dict | None = None) -> BatchSpec:
    """The spec in ``path`` with ``overrides`` (flag values that are not None) on top."""
    text = read_text(path)
    where = "<stdin>" if path == "-" else str(path)
    values, lines = parse_mapping(text, where)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    if given.keys() & WORLD_KEYS:
        values = {k: v for k, v in values.items() if k not in WORLD_KEYS}
    if "global_batch_size" in given:
        values.pop("effective_batch_size", None)
    return build_spec(values | given, where, lines)
