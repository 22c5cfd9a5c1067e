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
    (Korthikanti et al. 2022), the pipeline's in-flight micro-batches, logits, overhead."""
    from translator import memory, solve
    from translator.errors import InputError
    from translator.findings import finding
    from translator.layouts import load_layout

    values = pop_spec_values(params)
    if file is None and not any(v is not None for v in values.values()):
        values |= {"micro_batch_size": 1, "world_size": 1, "gradient_accumulation_steps": 1}
    spec, _ = load_layout(file, framework, values)
    if not spec.is_decided:
        raise InputError(
            "the micro-batch is not decided: give --micro-batch (batchspec plan lists the options)"
        )
    seq_len = spec.sequence_length or 2048
    shape = memory.model_named(model, seq_len)
    run = memory.run_of(
        spec,
        seq_len,
        precision=precision or "bf16",
        recompute=recompute,
        attention=attention,
        sequence_parallel=sequence_parallel,
        distributed_optimizer=distributed_optimizer,
        overhead=parse_memory(overhead or "1G", "--overhead") or 0,
    )
    result = memory.estimate(shape, run)
    limit = parse_memory(capacity, "--capacity")
    fits = best = None
    findings = []
    if limit:
        fits = result.total <= limit
        options = [m for m, _ in solve.decompositions(spec.global_batch, spec.data_parallel)]
        best = memory.largest_fitting(shape, run, options, limit)
        if not fits:
            findings.append(
                finding(
                    "memory-exceeds-capacity",
                    f"an estimated {result.total / GIB:.1f} GiB per GPU does not fit in "
                    f"{limit / GIB:.1f} GiB",
                    where=file,
                    hint=(
                        f"micro-batch {best} keeps the global batch {spec.global_batch_size} and "
                        "fits"
                        if best
                        else "no micro-batch fits: shard more (ZeRO, TP, PP), "
                        "recompute activations, or use more memory"
                    ),
                )
            )
    if as_json:
        emit_json(
            {
                "model": shape.name,
                "parameters": shape.parameters,
                "sequence_length": seq_len,
                "layout": spec.output(),
                "precision": run.precision,
                "recompute": recompute,
                "attention": attention,
                **result.as_dict(),
                "capacity_bytes": limit,
                "fits": fits,
                "largest_fitting_micro_batch": best,
                "findings": [f.as_dict() for f in findings],
            }
        )
        exit_for(findings)
        return
    click.echo(
        f"{shape.name}: {shape.parameters:,} parameters; micro-batch "
        f"{spec.micro_batch_size}, sequence {seq_len}, DP {spec.data_parallel_size}, TP "
        f"{spec.tensor_parallel_size}, PP {spec.pipeline_parallel_size}, CP "
        f"{spec.context_parallel_size}, ZeRO {run.zero_stage}, {run.precision}, "
        f"recompute {recompute}, {attention} attention"
    )
    print_table(
        [(p.name, f"{p.bytes / GIB:8.2f} GiB   {p.formula}") for p in result.parts]
        + [("total", f"{result.total / GIB:8.2f} GiB per GPU")]
    )
    if fits and limit:
        click.echo(
            f"fits in {limit / GIB:.1f} GiB; the largest micro-batch that fits and keeps "
            f"the global batch {spec.global_batch_size}: {best}"
        )
    print_findings(findings)
    exit_for(findings)
