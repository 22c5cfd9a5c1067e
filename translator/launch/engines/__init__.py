"""One module per framework, each with ``run(ctx: RunContext) -> RankResult`` (the framework's
real code path, fed the rendered config, counting through :mod:`translator.launch.harness`) and
``refuse(spec, device) -> str | None`` (why it cannot run a layout, checked before any process
starts)."""

import importlib

#: The engine that runs a plain spec (no framework config): hand-written DDP.
TORCH = "torch"


def engine_names() -> tuple[str, ...]:
    """``smoke --framework`` choices: every framework with an ``ENGINE``, and torch. (Names
    only: a plugin whose module is not imported yet is offered, and checked when chosen.)"""
    from translator.frameworks import names

    return (*names(), TORCH)


def module(framework: str):
    """The engine module for ``framework``."""
    if framework == TORCH:
        return importlib.import_module(f"{__name__}.torch_ddp")
    from translator.frameworks import get

    path = getattr(get(framework), "ENGINE", None)
    if path is None:
        from translator.errors import InputError

        raise InputError(f"the {framework} framework has no smoke engine")
    return importlib.import_module(path)


def config_backend(framework: str) -> str | None:
    """The framework whose config the engine runs (the torch engine runs the spec itself)."""
    return None if framework == TORCH else framework


def refusal(framework: str, spec, device: str) -> str | None:
    """Why the ``framework`` engine cannot run ``spec``'s layout on ``device`` (``cpu`` or
    ``gpu``), else None. Engines import their framework lazily, so this is cheap."""
    return module(framework).refuse(spec, device)
