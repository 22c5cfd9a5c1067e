"""The smoke engines: every framework's :class:`~translator.plugin.contract.Engine`, and the
plain one that runs a spec with no framework config (hand-written DDP, ``torch``).

An engine's module has ``run(ctx: RunContext) -> RankResult`` (the framework's real code path,
fed the config, counting through :mod:`translator.rank.harness`) and ``refuse(spec, device)
-> str | None`` (why it cannot run a layout, asked before any process starts). It may also have
``refuse_config(config, partners, where, device) -> str | None``: why it cannot run the config
text it is fed (with its partner files, name -> text; ``where`` is the user's file) on
``device``, such as a setting a CPU rank cannot run; also asked before any process starts;
``refuse_model(spec, config) -> str | None``: why it cannot build the job's model for that
layout and config (a path of it that builds only the stand-in), asked likewise;
``refuse_shape(shape) -> str | None`` (an engine with the ``model_shape`` option): why its
framework's model code cannot build the job's shape (a :class:`translator.model.memory.Model`), asked
likewise. An engine
that can run DeepSpeed has ``zero_stage(config, partners) -> int | None``: the ZeRO stage it
runs that config at (None: not under DeepSpeed)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType

from translator.plugin.contract import Engine, missing
from translator.words.errors import InputError

#: The engine that runs a plain spec (no framework config).
TORCH = "torch"
PLAIN = Engine(
    "translator.rank.torch_engine",
    requires=("torch",),
    options=frozenset({"recompute", "parity", "model_config"}),
)


def engine_names() -> tuple[str, ...]:
    """``smoke --framework`` choices: every framework, and torch. (Names only: a plugin whose
    package is not imported yet is offered, and checked when chosen.)"""
    from translator.plugin.registry import names

    return (*names(), TORCH)


def engine(name: str) -> Engine:
    """The engine called ``name``; a framework without one is an input error."""
    if name == TORCH:
        return PLAIN
    from translator.plugin.registry import get

    found = get(name).engine
    if found is None:
        raise InputError(f"the {name} framework has no smoke engine")
    return found


def with_option(option: str) -> list[str]:
    """The engines that honour an engine option (``recompute``, ``zero_stages``)."""
    return [n for n in engine_names() if _has_engine(n) and option in engine(n).options]


def module(name: str) -> ModuleType:
    """The engine's module, imported."""
    return importlib.import_module(engine(name).module)


def config_framework(name: str) -> str | None:
    """The framework whose config the engine runs (the plain engine runs the spec itself)."""
    return None if name == TORCH else name


def _listed(names) -> str:
    """``torch``, ``torch and deepspeed``, ``a, b and c``."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def not_installed(name: str) -> tuple[list[str], str]:
    """The packages the ``name`` engine needs that are not installed here, and the command
    that installs them."""
    found = engine(name)
    extra = f"pip install 'batchspec[{found.extra}]'" if found.extra else "pip install torch"
    return missing(found.requires), extra


def require_installed(name: str) -> None:
    """Refuse, before any process starts, an engine whose packages are not installed, naming
    what to install."""
    absent, extra = not_installed(name)
    if absent:
        raise InputError(
            f"the {name} engine needs {_listed(absent)}, "
            f"which {'is' if len(absent) == 1 else 'are'} not installed here: "
            f"{extra} (nothing was started)"
        )


def require_zero_packages(name: str, stage: int | None) -> None:
    """Refuse, before any process starts, a run of the ``name`` engine under ZeRO ``stage``
    (the job hands it a DeepSpeed config) when what its ranks then import is not installed
    here, naming both extras (the engine's own names only its framework's)."""
    found = engine(name)
    absent = missing(found.zero_requires)
    if stage is None or not absent:
        return
    extras = ",".join(x for x in (found.extra, found.zero_extra) if x)
    raise InputError(
        f"the {name} engine runs this job under ZeRO-{stage}, which needs {_listed(absent)}, "
        f"not installed here: pip install 'batchspec[{extras}]' (nothing was started)"
    )


def model_parallel_sizes(spec) -> str:
    """The model-parallel sizes above 1 of ``spec`` (``tensor 2, pipeline 4``); empty when it
    is data-parallel only."""
    sizes = (
        ("tensor", spec.tensor_parallel_size),
        ("pipeline", spec.pipeline_parallel_size),
        ("context", spec.context_parallel_size),
    )
    return ", ".join(f"{name} {size}" for name, size in sizes if size > 1)


def data_parallel_only(engine_name: str, spec) -> str | None:
    """An engine's refusal of a ``spec`` that is not data-parallel only, else None."""
    sizes = model_parallel_sizes(spec)
    return f"the {engine_name} engine runs data parallelism only, not {sizes}" if sizes else None


def runs_layout(spec, device: str) -> list[str]:
    """The frameworks whose engines run ``spec``'s layout on ``device``."""
    from translator.plugin.registry import names

    return [n for n in names() if _has_engine(n) and refusal(n, spec, device) is None]


def _has_engine(name: str) -> bool:
    if name == TORCH:
        return True
    from translator.plugin.registry import get

    try:
        return get(name).engine is not None
    except InputError:  # a broken plugin is reported when it is chosen, not here
        return False


def config_refusal(
    name: str, config: str, partners: Mapping[str, str], where: str, device: str
) -> str | None:
    """Why the ``name`` engine cannot run ``config`` (the text it is fed, from the file
    ``where``, with ``partners``) on ``device``, else None; see the module's docstring."""
    check = getattr(module(name), "refuse_config", None)
    return None if check is None else check(config, partners, where, device)


def zero_stage(name: str, config: str, partners: Mapping[str, str]) -> int | None:
    """The ZeRO stage the ``name`` engine runs ``config`` (with ``partners``) at under
    DeepSpeed; None where it does not run DeepSpeed."""
    stage = getattr(module(name), "zero_stage", None)
    return None if stage is None else stage(config, partners)


def runs_zero(name: str) -> bool:
    """Whether the ``name`` engine runs DeepSpeed where its config names it (it says the ZeRO
    stage it runs: :func:`zero_stage`)."""
    return getattr(module(name), "zero_stage", None) is not None


def model_refusal(name: str, spec, config: str) -> str | None:
    """Why the ``name`` engine cannot build the job's model for ``spec`` and the ``config``
    text it is fed (its module's optional ``refuse_model(spec, config)``), else None."""
    check = getattr(module(name), "refuse_model", None)
    return None if check is None else check(spec, config)


def shape_refusal(name: str, shape) -> str | None:
    """Why the ``name`` engine cannot build ``shape`` (its module's optional
    ``refuse_shape(shape)``), else None."""
    check = getattr(module(name), "refuse_shape", None)
    return None if check is None else check(shape)


def refusal(name: str, spec, device: str) -> str | None:
    """Why the ``name`` engine cannot run ``spec``'s layout on ``device`` (``cpu`` or ``gpu``),
    else None. Engines import their framework lazily, so this is cheap."""
    return module(name).refuse(spec, device)
