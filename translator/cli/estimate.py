"""``batchspec estimate``: memory per GPU before any launch, part by part."""

from __future__ import annotations

import click

from translator.cli.common import (
    command,
    emit_json,
    exit_for,
    pop_spec_values,
    print_findings,
    print_table,
    spec_options,
)
from translator.cli.options import parse_memory, run_options
from translator.memory import GIB, PRESETS

#: --model's help, shared with tune.
MODEL_HELP = (
    f"A preset ({', '.join(PRESETS)}) or a local Hugging Face config.json (read, "
    "nothing downloaded)."
)


@command("estimate")
@click.argument("file", required=False, metavar="[FILE]")
@spec_options
@click.option("--framework", help="Read FILE as this framework's config (default: detect).")
@click.option("--model", default="125m", show_default=True, help=MODEL_HELP)
@click.option(
    "--recompute",
    type=click.Choice(["none", "selective", "full"]),
    default="none",
    show_default=True,
    help="Activation recomputation.",
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
    recompute,
    precision,
    attention,
    sequence_parallel,
    distributed_optimizer,
    overhead,
    capacity,
    **params,
) -> None:
    """Estimate memory per GPU for FILE's layout (a spec or a framework config) or the flags'
    (micro-batch 1 on one GPU when nothing is given): model states by ZeRO stage, activations
    (Korthikanti et al. 2022), the pipeline's in-flight micro-batches, logits, overhead.

    Examples:
      $ batchspec estimate ds_config.json --model llama3-8b --capacity 80G
      $ batchspec estimate axolotl.yml --world-size 8 --recompute full
    """
    from translator.estimation import estimate as estimate_layout
    from translator.layouts import load_layout

    values = pop_spec_values(params)
    if file is None and not any(v is not None for v in values.values()):
        values |= {"micro_batch_size": 1, "world_size": 1, "gradient_accumulation_steps": 1}
    spec, _ = load_layout(file, framework, values)
    found = estimate_layout(
        spec,
        model,
        capacity=parse_memory(capacity, "--capacity"),
        where=file,
        precision=precision or "bf16",
        recompute=recompute,
        attention=attention,
        sequence_parallel=sequence_parallel,
        distributed_optimizer=distributed_optimizer,
        overhead=parse_memory(overhead or "1G", "--overhead") or 0,
    )
    if as_json:
        emit_json(found.as_dict())
    else:
        _print(found)
    exit_for(found.findings)


def _print(found) -> None:
    shape, spec, run = found.shape, found.spec, found.run
    click.echo(
        f"{shape.name}: {shape.parameters:,} parameters; micro-batch "
        f"{spec.micro_batch_size}, sequence {found.sequence_length}, DP {spec.data_parallel_size}, TP "
        f"{spec.tensor_parallel_size}, PP {spec.pipeline_parallel_size}, CP "
        f"{spec.context_parallel_size}, ZeRO {run.zero_stage}, {run.precision}, "
        f"recompute {run.recompute}, {run.attention} attention"
    )
    print_table(
        [(p.name, f"{p.bytes / GIB:8.2f} GiB   {p.formula}") for p in found.result.parts]
        + [("total", f"{found.result.total / GIB:8.2f} GiB per GPU")]
    )
    if found.fits and found.capacity:
        click.echo(
            f"fits in {found.capacity / GIB:.1f} GiB; the largest micro-batch that fits and keeps "
            f"the global batch {spec.global_batch}: {found.largest_fitting}"
        )
    print_findings(found.findings)
