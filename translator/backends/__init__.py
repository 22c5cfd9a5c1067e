"""The backends, by name. Each module has the same small contract:

- ``NAME``: registry name; ``TEMPLATE``: its template in ``templates/``; ``FILENAME``: the file
  ``render`` writes;
- ``context(spec) -> dict``: the values its template needs;
- ``read(text, where) -> Reading``: each batch value in a file, with its line and span;
- ``interpret(reading, launch) -> (spec values, findings)``: the values as the framework itself
  completes them on that launch, with its own errors;
- ``check(spec) -> list[Finding]``: that framework's quirks for a spec;
- ``edits(reading, spec) -> {key: new value}``: what ``update`` changes in a file.

Adding a backend is one module, one template and one line here.
"""

from __future__ import annotations

from types import ModuleType

from translator.backends import axolotl, deepspeed, megatron
from translator.errors import InputError

BACKENDS: dict[str, ModuleType] = {
    "deepspeed": deepspeed,
    "axolotl": axolotl,
    "megatron": megatron,
}


def get_backends(names: str) -> list[ModuleType]:
    """Backends for a comma-separated list of names; an unknown name is an input error."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in BACKENDS]
    if unknown or not wanted:
        raise InputError(f"unknown backend {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(BACKENDS)}")
    return [BACKENDS[n] for n in dict.fromkeys(wanted)]
