"""The one registry of the frameworks (each one package under ``translator/frameworks/``).

Every framework, built in or plugged in, registers under the entry-point group
``batchspec.frameworks`` (``name = "package.module:FRAMEWORK"``, or a plain module that
:func:`~translator.plugin.contract.from_module` adapts); batchspec declares its own in its
``pyproject.toml`` exactly as a plugin does. Names come in order: batchspec's own, then the
plugins', each by name; which framework claims a file first is each one's ``claim_order``. Every list of frameworks (command-line choices, detection of a file's
framework, ``validate --with-framework``, ``update``, ``smoke``) is derived from here.

Names are known without importing anything (entry points are metadata); a framework's package
is imported when it is first used, so ``plan`` does not pay for the others.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from types import MappingProxyType

from translator.plugin.contract import Framework, from_module
from translator.shell.launchers import LAUNCHERS, LauncherDefinition
from translator.words.errors import InputError

#: Entry-point group every framework registers under.
GROUP = "batchspec.frameworks"
#: The distribution whose entry points come first.
OWN = "batchspec"


def _points() -> list:
    """The installed entry points of the group, as metadata (nothing imported)."""
    from importlib.metadata import entry_points

    return list(entry_points(group=GROUP))


@cache
def _entry_points() -> dict:
    """Name -> entry point: batchspec's own first, then the plugins', each by name."""
    points = _points()
    own = sorted((p for p in points if _is_own(p)), key=_name)
    others = sorted((p for p in points if not _is_own(p)), key=_name)
    table: dict = {}
    for point in own + others:
        table.setdefault(point.name, point)
    return table


def _is_own(point) -> bool:
    return point.dist is not None and point.dist.name == OWN


def _name(point) -> str:
    return point.name


def names() -> tuple[str, ...]:
    """Every framework's name: batchspec's own, then the installed plugins'."""
    return tuple(_entry_points())


@cache
def get(name: str) -> Framework:
    """The framework called ``name``, imported now; an unknown name or a plugin that does not
    meet the contract is an input error."""
    point = _entry_points().get(name)
    if point is None:
        raise InputError(f"unknown framework {name!r}; choose from {', '.join(names())}")
    try:
        loaded = point.load()
    except Exception as exc:  # a broken plugin must not take batchspec down with it
        raise InputError(
            f"the plugin framework {name!r} ({point.value}) does not load: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    try:
        framework = loaded if isinstance(loaded, Framework) else from_module(loaded)
    except ValueError as exc:
        raise InputError(f"the plugin framework {name!r} ({point.value}) {exc}") from None
    if framework.name != name:
        raise InputError(
            f"the plugin framework {name!r} ({point.value}) calls itself {framework.name!r}"
        )
    from translator.words.findings import register

    for code, (severity, about) in framework.codes.items():
        register(code, severity, about)
    return framework


#: The name that stands for every framework in a list of them (``--to all``).
ALL = "all"


def get_many(wanted_names: str) -> list[Framework]:
    """Frameworks for a comma-separated list of names, or :data:`ALL` for every one; an
    unknown name is an input error."""
    wanted = [n.strip() for n in wanted_names.split(",") if n.strip()]
    if wanted == [ALL]:
        wanted = list(names())
    unknown = [n for n in wanted if n not in names()]
    if unknown or not wanted:
        raise InputError(
            f"unknown framework {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(names())}, or {ALL}"
        )
    return [get(n) for n in dict.fromkeys(wanted)]


def by_claim_order() -> list[Framework]:
    """Every framework (imported), in the order they claim a file by its content."""
    return sorted((get(n) for n in names()), key=lambda f: f.claim_order)


def launchers() -> Mapping[str, LauncherDefinition]:
    """Every launcher a launch line may start, by name: the shell's generic ones (torchrun,
    srun, mpirun...), then those the frameworks bring (``Framework.launchers``) in registry
    order; a name already taken keeps its first definition."""
    return _launchers(names())


@cache
def _launchers(known: tuple[str, ...]) -> Mapping[str, LauncherDefinition]:
    table = dict(LAUNCHERS)
    for name in known:
        for launcher in get(name).launchers:
            table.setdefault(launcher.name, launcher)
    return MappingProxyType(table)


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
"""Every framework, built in or plugged in, by name."""
