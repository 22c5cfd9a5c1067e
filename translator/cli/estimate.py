"""``batchspec estimate``: memory per GPU before any launch, part by part."""

from __future__ import annotations

import click

from translator import frameworks
from translator.cli.batch_options import COUNT, SPEC_FLAGS, pop_spec_values, spec_options
from translator.cli.command import command
from translator.cli.output import emit_json, exit_for, print_findings, print_table, printable
from translator.cli.run_options import parse_memory, run_options
from translator.model.memory import GIB, PRESETS

#: --model's help.
MODEL_HELP = (
    f"A preset ({', '.join(PRESETS)}) or a local Hugging Face config.json or its folder (read, "
    "nothing downloaded), instead of the model FILE names (the default)."
)

#: How each run setting a file fixes is named in the table's header.
LABELS = {
    "zero_stage": "ZeRO",
    "offload": "offload",
    "gradient_bytes": "bytes per gradient",
    "sequence_parallel": "sequence parallel",
    "recompute": "recompute",
}


@command("estimate")
@click.argument("file", required=False, metavar="[FILE]")
@spec_options
@click.option(
    "--framework",
    type=click.Choice(frameworks.names()),
    help="Read FILE as this framework's config (default: detect).",
)
@click.option("--model", help=MODEL_HELP)
@click.option(
    "--model-config",
    metavar="PATH",
    help="The job's model's config.json (or its folder), for a job whose model is not found here.",
)
@click.option(
    "--layers", type=COUNT, help="Cut the job's model to N layers, keeping its architecture."
)
@click.option(
    "--recompute",
    type=click.Choice(["none", "selective", "full"]),
    help="Activation recomputation (default: the file's, else none).",
)
@click.option(
    "--zero-stage",
    type=click.Choice(["0", "1", "2", "3"]),
    help="ZeRO stage the model states are sharded as (default: the file's sharding, else 0).",
)
@run_options
@click.option(
    "--capacity",
    help="Memory of one GPU (e.g. 80G): say whether it fits, and the "
    "largest micro-batch that does while keeping the global batch.",
)
def estimate(
    as_json: bool,
    file: str | None,
    framework,
    model,
    model_config,
    layers,
    recompute,
    zero_stage,
    precision,
    attention,
    sequence_parallel,
    distributed_optimizer,
    overhead,
    capacity,
    **params,
) -> None:
    """Estimate memory per GPU for FILE's layout (a spec, or a framework's config or launch
    script) or the flags' (micro-batch 1 on one GPU when nothing is given): model states by
    ZeRO stage, activations (Korthikanti et al. 2022), the pipeline's in-flight micro-batches,
    logits, overhead. FILE's sharding (ZeRO, Megatron's distributed optimizer, FSDP),
    offload, sequence parallelism and recomputation are read; a flag beside FILE fills what
    it does not say, or overrides what it does (and says so), or is refused.

    Examples:
      $ batchspec estimate ds_config.json --model llama3-8b --capacity 80G
      $ batchspec estimate axolotl.yml --world-size 8 --recompute full
    """
    from translator.checks.estimation import Flag, layout_of_flags, layout_of_source
    from translator.checks.estimation import estimate as estimate_layout
    from translator.inspection import read_source
    from translator.words.errors import InputError

    names = {field: flag for flag, field, _, _ in SPEC_FLAGS}
    flags = [Flag(names[k], k, v) for k, v in pop_spec_values(params).items() if v is not None]
    if zero_stage is not None and distributed_optimizer and zero_stage != "1":
        raise InputError(
            f"--zero-stage {zero_stage} and --distributed-optimizer (ZeRO 1): give one of them"
        )
    if zero_stage is not None:
        flags.append(Flag("--zero-stage", "zero_stage", int(zero_stage)))
    elif distributed_optimizer:
        flags.append(Flag("--distributed-optimizer", "zero_stage", 1, switch=True))
    if recompute is not None:
        flags.append(Flag("--recompute", "recompute", recompute))
    if sequence_parallel:
        flags.append(Flag("--sequence-parallel", "sequence_parallel", True, switch=True))
    if file is None:
        if framework is not None:
            raise InputError("--framework names how to read FILE: give a FILE")
        read, layout = None, layout_of_flags(flags, names)
    else:
        read = read_source(file, framework)
        layout = layout_of_source(read, flags)
    limit = parse_memory(capacity, "--capacity")
    fixed = parse_memory(overhead or "1G", "--overhead") or 0
    chosen = _model(file, read, framework, model, model_config, layers)
    found = estimate_layout(
        layout,
        model or chosen.shape,
        capacity=limit,
        where=file,
        precision=precision or "bf16",
        attention=attention,
        overhead=fixed,
    )
    if model is None:
        found.source = chosen.output(chosen.shape.parameters)
    if as_json:
        emit_json(found.as_dict())
    else:
        _print(found)
    exit_for(found.findings)


def _model(file, read, framework, model, model_config, layers):
    """The model FILE names, as :func:`translator.launch.run_model.choose` finds it for an
    estimate; a preset or config.json given as ``--model`` is read by the estimate itself."""
    from translator.launch import run_model
    from translator.words.errors import InputError

    if model is not None:
        if model_config is not None or layers is not None:
            raise InputError(
                f"--model {model} names the model: give it without --model-config and --layers"
            )
        return None
    named = None if read is None else run_model.named_in(read, model_config)
    where = file or "estimate without a FILE"
    return run_model.choose(where, named, framework or "", "estimate", None, layers, model_config)


def _print(found) -> None:
    from translator.checks.estimation import shown

    shape, spec, run, layout = found.shape, found.spec, found.run, found.layout
    offload = f", offload {'+'.join(sorted(run.offload))}" if run.offload else ""
    parallel = ", sequence parallel" if run.sequence_parallel else ""
    if found.source is not None:
        from translator.launch.run_model import line

        click.echo(printable(line(found.source)))
    click.echo(
        f"{shape.name}: {shape.parameters:,} parameters; micro-batch "
        f"{spec.micro_batch_size}, sequence {found.sequence_length}, DP {spec.data_parallel_size}, TP "
        f"{spec.tensor_parallel_size}, PP {spec.pipeline_parallel_size}, CP "
        f"{spec.context_parallel_size}, ZeRO {run.zero_stage}{offload}{parallel}, "
        f"{run.precision}, recompute {run.recompute}, {run.attention} attention"
    )
    for s in layout.settings:
        click.echo(printable(f"  from the file: {LABELS[s.field]} {shown(s.value)}: {s.where}"))
    for o in layout.overrides:
        click.echo(printable(f"  {o}"))
    if layout.rederived:
        click.echo(f"  re-derived: {', '.join(layout.rederived)}")
    for note in layout.notes:
        click.echo(printable(f"  note: {note}"))
    print_table(
        [(p.name, f"{p.bytes / GIB:8.2f} GiB   {p.formula}") for p in found.result.parts]
        + [("total", f"{found.result.total / GIB:8.2f} GiB per GPU")]
        + _host(found.result.host)
    )
    if found.fits and found.capacity:
        click.echo(
            f"fits in {found.capacity / GIB:.1f} GiB; the largest micro-batch that fits and keeps "
            f"the global batch {spec.global_batch}: {found.largest_fitting}"
        )
    print_findings(found.findings)


def _host(host) -> list[tuple[str, str]]:
    """The CPU memory a node needs, as a row of the table (none when nothing is kept there)."""
    if host is None:
        return []
    return [("CPU", f"{host.bytes / GIB:8.2f} GiB per node   {host.formula}")]
