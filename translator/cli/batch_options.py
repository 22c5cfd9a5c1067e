"""The options of the commands that read and write configs, each defined once: the spec's
fields, the launch a file may not say (``--world-size``, ``--tp``...), how a launch script is run
(``--env``, ``--run-dir``, its arguments after ``--``) and where rendered files go (``--to``,
``--out``, ``--into``)."""

from __future__ import annotations

import click

from translator.cli.output import STDOUT
from translator.plugin import registry as frameworks

COUNT = click.IntRange(min=1)


class OldSpellings(click.Option):
    """An option whose first name is the one ``--help`` shows; its other names are old
    spellings, kept working and hidden (``--gpus-per-node`` for ``--nproc-per-node``)."""

    def get_help_record(self, ctx: click.Context):
        names, self.opts = self.opts, self.opts[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = names


#: Old spellings of the spec flags, still accepted (hidden from ``--help``).
SPEC_OLD_SPELLINGS = {"--nproc-per-node": ("--gpus-per-node",)}

#: (flag, spec field, type, help) for every flag that sets a spec field.
SPEC_FLAGS = [
    (
        "--global-batch",
        "global_batch_size",
        COUNT,
        "Samples per optimizer step, all ranks together.",
    ),
    ("--micro-batch", "micro_batch_size", COUNT, "Samples per forward/backward on one rank."),
    ("--accumulation", "gradient_accumulation_steps", COUNT, "Micro-batches per optimizer step."),
    ("--world-size", "world_size", COUNT, "All processes (GPUs)."),
    ("--nnodes", "nodes", COUNT, "Nodes (with --nproc-per-node)."),
    ("--nproc-per-node", "gpus_per_node", COUNT, "Processes (GPUs) per node."),
    ("--tp", "tensor_parallel_size", COUNT, "Tensor-parallel size."),
    ("--pp", "pipeline_parallel_size", COUNT, "Pipeline-parallel size."),
    ("--cp", "context_parallel_size", COUNT, "Context-parallel size."),
    ("--ep", "expert_parallel_size", COUNT, "Expert-parallel size."),
    ("--num-experts", "num_experts", COUNT, "Experts per MoE layer."),
    ("--vp", "virtual_pipeline_stages", COUNT, "Virtual pipeline stages per pipeline rank."),
    ("--seq-len", "sequence_length", COUNT, "Tokens per sample."),
    (
        "--lr",
        "learning_rate",
        click.FloatRange(min=0, min_open=True),
        "Learning rate tuned at --lr-batch.",
    ),
    ("--lr-batch", "reference_global_batch_size", COUNT, "Global batch the --lr was tuned for."),
]


def spec_options(fn):
    """Flags that set spec fields; the command receives them as keyword arguments."""
    for flag, field, kind, help_text in reversed(SPEC_FLAGS):
        names = (flag, *SPEC_OLD_SPELLINGS.get(flag, ()), field)
        fn = click.option(*names, cls=OldSpellings, type=kind, default=None, help=help_text)(fn)
    return fn


def pop_spec_values(params: dict) -> dict:
    """Take the spec flags out of a command's parameters, leaving the rest."""
    return {field: params.pop(field) for _, field, _, _ in SPEC_FLAGS}


#: What ``--tp``/``--pp``/``--cp`` do: give a size the file does not say; ``convert``'s also
#: replace one it does.
FILLS = "when the file does not say (DeepSpeed under Megatron)"
REPLACES = (
    "in place of the file's (the accumulation re-solved to keep the global batch), or where "
    "it says none (DeepSpeed under Megatron)"
)


def launch_options(fn=None, *, replaces: bool = False):
    """``--framework`` and the launch flags that say what a config file may not; with
    ``replaces``, the parallel sizes replace the file's (``convert``)."""
    if fn is None:
        return lambda f: launch_options(f, replaces=replaces)
    options = [
        click.option(
            "--framework",
            type=click.Choice(frameworks.names()),
            default=None,
            help="Read the files as this framework's (default: detect).",
        ),
        click.option("--world-size", type=COUNT, default=None, help="All processes launched."),
        click.option("--nnodes", type=COUNT, default=None, help="Nodes (with --nproc-per-node)."),
        click.option(
            "--nproc-per-node",
            type=COUNT,
            default=None,
            help="Processes per node (with --nnodes, or with --world-size: world / N nodes); "
            "alone, the GPUs each node has, the job giving its nodes.",
        ),
        click.option(
            "--tp",
            type=COUNT,
            default=None,
            help=f"Tensor-parallel size, {REPLACES if replaces else FILLS}.",
        ),
        click.option("--pp", type=COUNT, default=None, help="Pipeline-parallel size, likewise."),
        click.option("--cp", type=COUNT, default=None, help="Context-parallel size, likewise."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def job_options(fn):
    """How a launch script is run: ``--env NAME=VALUE``, ``--run-dir``; its own arguments go
    after ``--``."""
    fn = click.option(
        "--run-dir",
        type=click.Path(file_okay=False),
        default=None,
        help="The folder the job runs in, where the paths it names start (default: the "
        "current folder, then the script's).",
    )(fn)
    return click.option(
        "--env",
        "environment",
        multiple=True,
        metavar="NAME=VALUE",
        help="Read a launch script with this variable set in its environment (repeatable); "
        "its arguments go after --.",
    )(fn)


def pop_job(params: dict):
    """``(launch, run_as)``: :func:`pop_launch` and :func:`pop_run_as`, where
    ``--nproc-per-node`` given alone is the GPUs each node of the job has (what a launcher that
    starts one process per visible GPU starts), the job's own lines giving its nodes."""
    gpus = None
    if params.get("world_size") is None and params.get("nnodes") is None:
        gpus = params.pop("nproc_per_node", None)
        params["nproc_per_node"] = None
    return pop_launch(params), pop_run_as(params, gpus)


def pop_run_as(params: dict, gpus: int | None = None):
    """Take the job options out of a command's parameters as a :class:`~translator.job.script.RunAs`;
    the script's arguments are what followed ``--``; ``gpus``: the GPUs each node has."""
    import re

    from translator.job.script import RunAs
    from translator.shell.values import Word
    from translator.words.errors import InputError

    environment = {}
    for item in params.pop("environment", ()):
        name, eq, value = item.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise InputError(f"--env {item!r}: give NAME=VALUE")
        environment[name] = value
    args = click.get_current_context().meta.get("batchspec.script_args")
    given = None if gpus is None else Word(str(gpus), 1)
    return RunAs(
        args, environment, params.pop("run_dir", None), gpus=given, gpus_key="--nproc-per-node"
    )


def pop_launch(params: dict):
    """Take the launch flags out of a command's parameters as a :class:`Launch`."""
    from translator.reading import Launch

    world, nnodes, nproc = (params.pop(k) for k in ("world_size", "nnodes", "nproc_per_node"))
    world, nnodes = layout_of(world, nnodes, nproc)
    return Launch(world, params.pop("tp"), params.pop("pp"), params.pop("cp"), nodes=nnodes)


def layout_of(
    world: int | None, nnodes: int | None, nproc: int | None
) -> tuple[int | None, int | None]:
    """``(world, nodes)`` from the layout flags: ``--world-size``, ``--nnodes`` with
    ``--nproc-per-node``, or ``--world-size`` with ``--nproc-per-node`` (world / N nodes);
    nodes ``None`` when the flags do not say them (a world given alone)."""
    from translator.batch.solve import whole_nodes
    from translator.words.errors import InputError

    if nproc is None:
        if nnodes is not None:
            raise InputError("give --nproc-per-node with --nnodes, or --world-size alone")
        return world, None
    if nnodes is not None:
        if world is not None and world != nnodes * nproc:
            raise InputError(f"--world-size {world} ≠ --nnodes {nnodes} × --nproc-per-node {nproc}")
        return nnodes * nproc, nnodes
    if world is None:
        raise InputError("give --nnodes or --world-size with --nproc-per-node")
    return world, whole_nodes(world, nproc, "--world-size", "--nproc-per-node")


def folder_not_stdout(ctx: click.Context, param: click.Parameter, value: str | None):
    """A ``--out`` folder where several files may go: ``-`` (stdout) is refused."""
    if value == STDOUT:
        raise click.BadParameter("- (stdout) takes one file; give a folder", ctx, param)
    return value


def frameworks_help(what: str) -> str:
    """Help for an option that takes frameworks: ``what``, then every registered name."""
    return f"{what}: comma-separated, or {frameworks.ALL}, of {', '.join(frameworks.names())}."


def output_options(fn):
    """``--to``, ``--out`` and ``--force``: where rendered configs go."""
    return _outputs(fn, into=False)


def into_options(fn):
    """:func:`output_options`, with ``--into`` in place of ``--out``: existing configs to
    write the batch keys into."""
    return _outputs(fn, into=True)


def _outputs(fn, into: bool):
    fn = click.option("--force", is_flag=True, help="Overwrite files that already exist.")(fn)
    fn = click.option(
        "--strict",
        is_flag=True,
        help="Write nothing and exit 1 when any framework of --to cannot take the batch "
        "(default: write those that can, and list the others with their reason).",
    )(fn)
    if into:
        fn = click.option(
            "--into",
            "into",
            type=click.Path(exists=True),
            help="Write the batch keys into this existing config of the --to framework, every "
            "other byte kept (as update does); a folder: into each of its configs that a --to "
            "framework claims. In place of --out.",
        )(fn)
    fn = click.option(
        "--out",
        "out_dir",
        required=not into,
        type=click.Path(file_okay=False),
        help="Folder to write into (created when missing); - writes the one file on stdout.",
    )(fn)
    return click.option(
        "--to",
        "targets",
        required=True,
        metavar="FRAMEWORKS",
        help=frameworks_help("Frameworks to write for"),
    )(fn)
