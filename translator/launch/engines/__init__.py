"""One module per framework, each with ``run(ctx: RunContext) -> RankResult`` (the framework's
real code path, fed the rendered config, counting through :mod:`translator.launch.harness`) and
``refuse(spec, device) -> str | None`` (why it cannot run a layout, checked before any process
starts)."""

import importlib

#: ``--framework`` name -> engine module in this package.
MODULES = {"deepspeed": "deepspeed", "megatron": "megatron", "axolotl": "axolotl",
           "torch": "torch_ddp"}
#: ``--framework`` name -> the backend whose rendered config the engine runs (torch: none).
CONFIG_BACKEND = {"deepspeed": "deepspeed", "megatron": "megatron", "axolotl": "axolotl",
                  "torch": None}


def refusal(framework: str, spec, device: str) -> str | None:
    """Why the ``framework`` engine cannot run ``spec``'s layout on ``device`` (``cpu`` or
    ``gpu``), else None. Engines import their framework lazily, so this is cheap."""
    return importlib.import_module(f"{__name__}.{MODULES[framework]}").refuse(spec, device)
