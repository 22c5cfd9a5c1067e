"""The batch layout a command works on, from a spec file, a framework config or flags."""

from __future__ import annotations

from translator.batch.spec_file import build_spec, load_spec, spec_values
from translator.spec import BatchSpec


def load_layout(
    path: str | None, framework: str | None, flags: dict
) -> tuple[BatchSpec, str | None]:
    """The spec of ``path`` (a spec, or a framework config read as ``framework`` or detected)
    with the spec ``flags`` that are set on top, flags alone without a file; and the framework
    whose config it was (None for a spec or flags)."""
    from translator.words.files import read_text

    given = {k: v for k, v in flags.items() if v is not None}
    if path is None:
        return build_spec(given, "flags"), None
    if spec_values(read_text(path), path) is not None:
        return load_spec(path, given), None
    from translator.inspection import inspect_file
    from translator.reading import Launch

    found = inspect_file(path, framework, Launch(world_size=given.get("world_size")))
    return found.require_spec(), found.reading.framework
