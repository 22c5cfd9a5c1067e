"""Spec files (YAML or JSON, the keys of the resolved-spec output) and flag overrides -> BatchSpec.

Malformed input (not a mapping, unknown key, a string where a count belongs...) is an
:class:`InputError` (exit 2) naming the file and line; arithmetic that does not work out is a
:class:`ConfigError` (exit 1) from the solver.
"""

from __future__ import annotations

import dataclasses
import decimal
import difflib
import math
import re
from collections.abc import Mapping

from pydantic import ValidationError

from translator.spec import BatchSpec, spec_fields
from translator.words import parsing
from translator.words.errors import ConfigError, InputError
from translator.words.files import read_text, suffix_of
from translator.words.findings import Finding

#: Keys that say the same thing (the world size); a flag for one replaces all of the file's.
WORLD_KEYS = {"world_size", "nodes", "gpus_per_node", "data_parallel_size"}
#: Keys of a ``plan --json`` output that are recomputed, so such an output is a valid spec.
DERIVED_KEYS = {"tokens_per_step", "findings", "options"}
#: The ``where`` of values given as command-line flags alone: there is no file to name.
FLAGS = "flags"
#: The keys a solver error is about, by its code: the first the file sets gives its line.
ERROR_KEYS = {
    "global-not-divisible": ("global_batch_size", "effective_batch_size"),
    "world-not-divisible": ("world_size", "nodes", "data_parallel_size"),
    "world-nodes-mismatch": ("world_size", "nodes"),
}


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


def build_spec(
    values: dict,
    where: str,
    lines: dict[str, int] | None = None,
    flags: Mapping[str, str] | None = None,
) -> BatchSpec:
    """Validate ``values`` as a BatchSpec; a field error becomes one line naming file and line.

    ``flags``: the command's flag for each field, so that a message about a value the file
    does not give (no line in ``lines``) names the flag the user typed."""
    if "global_batch_size" in values and "effective_batch_size" in values:
        raise InputError(
            f"{where}: give global_batch_size or its alias effective_batch_size, not both"
        )
    lines = lines or {}
    # A world the flags gave (a world flag drops the file's world keys) is named as the flags.
    from_flags = where == FLAGS or any(k in values and k not in lines for k in WORLD_KEYS)
    names = {k: flag for k, flag in (flags or {}).items() if k in WORLD_KEYS and from_flags}
    try:
        spec = BatchSpec.model_validate(
            {k: v for k, v in values.items() if k not in DERIVED_KEYS and v is not None},
            context={"names": names},
        )
    except ValidationError as exc:
        raise InputError(describe(exc, where, lines)) from None
    except ConfigError as exc:  # the values read, but do not fit together
        if where == FLAGS:
            raise
        raise ConfigError([_located(f, where, lines) for f in exc.findings]) from None
    except InputError as exc:  # too few values to solve
        if where == FLAGS:
            raise
        raise InputError(f"{where}: {exc}") from None
    _needs_reference(spec, where, lines, flags or {})
    return spec


#: Values that only say how to scale from the batch they were tuned at: without that batch
#: (``reference_global_batch_size``) they would be ignored without a word.
SCALED = ("learning_rate", "adam_beta2")


def _needs_reference(spec: BatchSpec, where: str, lines: dict, flags: Mapping[str, str]) -> None:
    if spec.reference_global_batch_size is not None:
        return
    for key in SCALED:
        if getattr(spec, key) is None:
            continue
        reference = "reference_global_batch_size"
        if key not in lines and key in flags:
            in_file = "" if where == FLAGS else f" (or {reference} in {where})"
            raise InputError(
                f"{flags[key]} needs {flags.get(reference, reference)}{in_file}, the global "
                "batch the learning rate was tuned for: batchspec only scales it from that batch"
            )
        at = f"{where}:{lines[key]}" if key in lines else where
        also = f" (or {flags[reference]})" if reference in flags else ""
        raise InputError(
            f"{at}: {key} needs {reference}{also}, the global batch it was tuned for: "
            "batchspec only scales it from that batch"
        )


def _located(f: Finding, where: str, lines: dict[str, int]) -> Finding:
    """``f`` about ``where``, at the line of the key it is about when the file sets that key."""
    if f.where:
        return f
    line = next((lines[k] for k in ERROR_KEYS.get(f.code, ()) if k in lines), None)
    return dataclasses.replace(f, where=where if line is None else f"{where}:{line}")


def describe(exc: ValidationError, where: str, lines: dict[str, int]) -> str:
    """One line for the first of pydantic's errors (and how many more there are)."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    key = ".".join(str(p) for p in first["loc"]) or "spec"
    top = str(first["loc"][0]) if first["loc"] else ""
    at = f"{where}:{lines[top]}" if top in lines else where
    number = _number_in_text(first.get("input"))
    if number is not None:  # one error for the field, not one per member of its type's union
        others = {e["loc"][0] for e in errors if e["loc"] and e["loc"][0] != first["loc"][0]}
        more = f" (and {len(others)} more)" if others else ""
        return f"{at}: {parsing.brief(top, quote='')} is the text {first['input']!r}, not a number{number}{more}"
    if first["type"] == "extra_forbidden":
        close = difflib.get_close_matches(top, sorted(spec_fields()), n=1)
        shown = parsing.brief(key, quote="'")
        text = f"unknown key {shown}" + (f" (did you mean '{close[0]}'?)" if close else "")
    else:
        text = f"{parsing.brief(key, quote='')}: {first['msg']}"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{at}: {text}{more}"


def _number_in_text(value: object) -> str | None:
    """How to write ``value``, a string that holds a number, as one (``: write 64``); None
    when it is no such string. YAML 1.1, PyYAML's, reads ``3e-4`` (no dot) as text, as the
    Axolotl and Trainer YAMLs people copy write it."""
    if not isinstance(value, str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    if number.is_integer() and "e" not in value.lower() and "." not in value:
        return f": write {int(number)}"
    plain = format(decimal.Decimal(repr(number)), "f")
    # YAML 1.1's float has a dot and a signed exponent.
    dotted = re.sub(r"^\s*([+-]?\d+)(?:\.(\d*))?[eE]([+-]?)(\d+)\s*$", _yaml_float, value)
    if dotted != value:
        why = f"YAML reads {value} as text: a float needs a dot and a signed exponent"
        return f" ({why}): write {plain} or {dotted}"
    return f": write {plain}"


def _yaml_float(match: re.Match) -> str:
    whole, fraction, sign, exponent = match.groups()
    return f"{whole}.{fraction or 0}e{sign or '+'}{exponent}"


def source_name(path: str) -> str:
    """How messages name a spec file (``-`` is standard input)."""
    return "<stdin>" if path == "-" else str(path)


def load_spec(
    path: str, overrides: dict | None = None, flags: Mapping[str, str] | None = None
) -> BatchSpec:
    """The spec in ``path`` with ``overrides`` (flag values that are not None) on top;
    ``flags`` names the command's flag of each field (see :func:`build_spec`)."""
    values, where, lines = load_values(path, overrides)
    return build_spec(values, where, lines, flags)


def load_values(path: str, overrides: dict | None = None) -> tuple[dict, str, dict[str, int]]:
    """The values of the spec file ``path`` with ``overrides`` on top, not yet validated: the
    values, how messages name the file, and the line of each value the file still gives."""
    where = source_name(path)
    values, lines = parse_mapping(read_text(path), where)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    if given.keys() & WORLD_KEYS:
        values = {k: v for k, v in values.items() if k not in WORLD_KEYS}
    if "global_batch_size" in given:
        values.pop("effective_batch_size", None)
    # A line is cited only for a value the file still gives (not one a flag replaced).
    lines = {k: line for k, line in lines.items() if k in values and k not in given}
    return values | given, where, lines


#: Spec keys that are also top-level keys of a framework's own config (Axolotl's, the HF
#: Trainer's, torchtune's): a file of these alone is that framework's (a rendered Axolotl file
#: may hold only micro_batch_size and gradient_accumulation_steps), not a spec.
SHARED_KEYS = frozenset(
    {
        "micro_batch_size",
        "gradient_accumulation_steps",
        "tensor_parallel_size",
        "context_parallel_size",
        "expert_parallel_size",
        "num_experts",
        "learning_rate",
        "optimizer",
        "adam_beta2",
    }
)


def spec_values(text: str, path: str) -> dict | None:
    """The mapping when the file is a batchspec spec (only spec keys, one at least that no
    framework's config has: :data:`SHARED_KEYS`), else None."""
    if suffix_of(path) not in (".yaml", ".yml", ".json") and path != "-":
        return None
    try:
        values, _ = parse_mapping(text, path)
    except InputError:
        return None
    keys = set(values)
    return values if keys - SHARED_KEYS and keys <= spec_fields() | DERIVED_KEYS else None
