"""The batch layout a command works on, from a spec file, a framework config or flags."""

from __future__ import annotations

from pathlib import Path

from translator.errors import InputError
from translator.spec import BatchSpec, spec_fields
from translator.spec_file import DERIVED_KEYS, build_spec, load_spec, parse_mapping


def spec_values(text: str, path: str) -> dict | None:
    """The mapping when the file is a batchspec spec (only spec keys), else None."""
    if Path(path).suffix.lower() not in (".yaml", ".yml", ".json") and path != "-":
        return None
    try:
        values, _ = parse_mapping(text, path)
    except InputError:
        return None
    keys = set(values)
    return values if keys and keys <= spec_fields() | DERIVED_KEYS else None


def load_layout(
    path: str | None, framework: str | None, flags: dict
) -> tuple[BatchSpec, str | None]:
    """The spec of ``path`` (a spec, or a framework config read as ``framework`` or detected)
    with the spec ``flags`` that are set on top, flags alone without a file; and the framework
    whose config it was (None for a spec or flags)."""
    from translator.files import read_text

    given = {k: v for k, v in flags.items() if v is not None}
    if path is None:
        return build_spec(given, "flags"), None
    if spec_values(read_text(path), path) is not None:
        return load_spec(path, given), None
    from translator.inspection import inspect_file
    from translator.reading import Launch

    found = inspect_file(path, framework, Launch(world_size=given.get("world_size")))
    return found.require_spec(), found.reading.framework
