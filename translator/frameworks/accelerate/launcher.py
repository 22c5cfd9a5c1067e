"""``accelerate launch`` as a launcher definition: its sizing flags, its own config file (which
this package reads for the world), what it leaves to its default config, and the accumulation
it imposes on a DeepSpeed launch."""

from __future__ import annotations

from translator.shell.launchers import LauncherDefinition, Sizes
from translator.shell.values import Word


def _unsized(out: Sizes) -> str | None:
    if "total" in out.words:
        return None
    if out.config_file is not None:
        return "accelerate launch takes --num_processes from its --config_file"
    if out.options.get("--multi_gpu") or out.options.get("--multi-gpu"):
        return "accelerate launch --multi_gpu without --num_processes uses every GPU it finds"
    return (
        "accelerate launch without --num_processes or --config_file takes them from its "
        "default config (accelerate config), which the job does not show"
    )


def _imposed(out: Sizes) -> tuple[str, Word] | None:
    """``--gradient_accumulation_steps N`` on a DeepSpeed launch, exported as
    ``ACCELERATE_GRADIENT_ACCUMULATION_STEPS`` (it wins over the program's own)."""
    deepspeed = any(
        f in out.options for f in ("--use_deepspeed", "--use-deepspeed", "--deepspeed_config_file")
    )
    for flag in ("--gradient_accumulation_steps", "--gradient-accumulation-steps"):
        if deepspeed and flag in out.options:
            return flag, out.options[flag]
    return None


LAUNCHER = LauncherDefinition(
    "accelerate",
    nodes=("--num_machines", "--num-machines"),
    total=("--num_processes", "--num-processes"),
    subcommand="launch",
    modules=frozenset({"accelerate.commands.launch"}),  # python -m accelerate.commands.launch
    switches=frozenset(
        {
            *("--multi_gpu", "--multi-gpu", "--use_deepspeed", "--use-deepspeed"),
            *("--use_fsdp", "--use-fsdp", "--cpu", "--tpu", "--quiet", "-q"),
            *("--no_python", "--module", "-m", "--debug"),
        }
    ),
    config_file=("--config_file", "--config-file"),
    unsized=_unsized,
    imposes=_imposed,
)
