"""The frameworks batchspec ships (``deepspeed``, ``axolotl``, ``megatron``), one module each,
and ``BACKENDS``: the registry of every framework, built in or plugged in
(:mod:`translator.frameworks`, which also states the contract a module meets)."""

from __future__ import annotations

from translator.errors import InputError
from translator.frameworks import FRAMEWORKS, Framework, names

BACKENDS = FRAMEWORKS


def get_backends(wanted_names: str) -> list[Framework]:
    """Frameworks for a comma-separated list of names; an unknown name is an input error."""
    wanted = [n.strip() for n in wanted_names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in names()]
    if unknown or not wanted:
        raise InputError(
            f"unknown backend {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(names())}"
        )
    return [BACKENDS[n] for n in dict.fromkeys(wanted)]
