"""Frameworks as plugins: the contract each one meets, and the one registry of them.

A framework is any object (a module will do) with the attributes of :class:`Framework`. The
three built in are modules of ``translator.backends``; others come from installed packages
through the entry-point group ``batchspec.frameworks`` (``name = "package.module"``, or
``"package.module:object"``). Every list of frameworks (command-line choices, detection of a
file's framework, ``validate --with-framework``, ``update``, ``smoke``) is derived from here.

Names are known without importing anything (entry points are metadata); a framework's module is
imported when it is first used, so ``plan`` does not pay for the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Protocol, runtime_checkable

from translator.errors import InputError

#: Entry-point group third-party frameworks register under.
GROUP = "batchspec.frameworks"
#: The built-in frameworks, in detection order.
BUILTIN = {
    "deepspeed": "translator.backends.deepspeed",
    "axolotl": "translator.backends.axolotl",
    "megatron": "translator.backends.megatron",
    "llamafactory": "translator.backends.llamafactory",
    "hf": "translator.backends.hf",
    "accelerate": "translator.backends.accelerate",
}


@runtime_checkable
class Framework(Protocol):
    """What batchspec needs of a framework. Optional, beside these: ``PACKAGE`` and
    ``verdict(inspection, world) -> str`` (its own validator, imported lazily, for ``validate
    --with-framework``), ``ENGINE`` (the module path of its smoke engine) and
    ``insertion(reading, key) -> (start, end)`` (where ``update`` writes a key the file lacks)."""

    NAME: str
    """Registry name (``--framework``, ``--to``)."""
    TEMPLATE: str
    """Its Jinja template: a name in batchspec's ``templates/``, or an absolute path."""
    FILENAME: str
    """The file ``render`` writes."""
    EXTENSIONS: tuple[str, ...]
    """File extensions it claims (``.json``); the first framework to claim one gets it."""

    def claims(self, text: str) -> bool:
        """Whether a file whose extension says nothing is this framework's, by its content."""

    def holds_batch(self, text: str) -> bool:
        """Whether a file of this framework sets any batch value at all."""

    def context(self, spec) -> dict:
        """The values its template needs."""

    def read(self, text: str, where: str):
        """Each batch value in a file, with its line and span (a ``Reading``)."""

    def interpret(self, reading, launch) -> tuple:
        """``(spec values, findings)``: the values as the framework completes them."""

    def check(self, spec) -> list:
        """The framework's quirks for a spec (findings)."""

    def edits(self, reading, spec) -> dict:
        """What ``update`` changes in a file: key -> new value (``None`` removes it)."""


#: The attributes of :class:`Framework`, for a plugin's error message.
REQUIRED = (
    "NAME",
    "TEMPLATE",
    "FILENAME",
    "EXTENSIONS",
    "claims",
    "holds_batch",
    "context",
    "read",
    "interpret",
    "check",
    "edits",
)


def _entry_points() -> dict:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=GROUP) if ep.name not in BUILTIN}


@cache
def names() -> tuple[str, ...]:
    """Every framework's name: the built-in ones, then the installed plugins'."""
    return tuple(BUILTIN) + tuple(sorted(_entry_points()))


@cache
def get(name: str) -> Framework:
    """The framework called ``name``, imported now; an unknown name or a plugin that does not
    meet the contract is an input error."""
    if name in BUILTIN:
        return importlib.import_module(BUILTIN[name])
    point = _entry_points().get(name)
    if point is None:
        raise InputError(f"unknown framework {name!r}; choose from {', '.join(names())}")
    try:
        framework = point.load()
    except Exception as exc:  # a broken plugin must not take batchspec down with it
        raise InputError(
            f"the plugin framework {name!r} ({point.value}) does not load: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(framework, Framework):
        missing = [a for a in REQUIRED if not hasattr(framework, a)]
        raise InputError(
            f"the plugin framework {name!r} ({point.value}) lacks {', '.join(sorted(missing))}"
        )
    if getattr(framework, "NAME", None) != name:
        raise InputError(
            f"the plugin framework {name!r} ({point.value}) calls itself "
            f"{getattr(framework, 'NAME', None)!r}"
        )
    return framework


class Registry(Mapping):
    """Name -> framework, importing each on first use."""

    def __getitem__(self, name: str) -> Framework:
        if name not in names():
            raise KeyError(name)
        return get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __len__(self) -> int:
        return len(names())


FRAMEWORKS = Registry()
