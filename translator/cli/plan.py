"""``batchspec plan``: solve a batch layout from flags or a spec file."""

from __future__ import annotations

import click

from translator.cli.common import (
    command,
    emit_json,
    exit_for,
    frameworks_help,
    pop_spec_values,
    print_findings,
    print_table,
    spec_options,
)
from translator.errors import InputError


@command("plan")
@click.argument("spec_file", required=False, metavar="[SPEC]")
@spec_options
@click.option(
    "--for",
    "targets",
    metavar="FRAMEWORKS",
    help=frameworks_help("Also check these frameworks' quirks"),
)
@click.option(
    "--world-sizes",
    metavar="SIZES",
    help="List every world size of SIZES (8-128, 8,16,32 or both) on which the global batch "
    "splits exactly; with the processes per node, whole nodes only.",
)
@click.option(
    "--max-micro",
    type=click.IntRange(min=1),
    help="With --world-sizes: the largest micro-batch to list (one that fits in memory).",
)
def plan(
    as_json: bool,
    spec_file: str | None,
    targets: str | None,
    world_sizes: str | None,
    max_micro: int | None,
    **params,
) -> None:
    """Solve global = micro × accumulation × data-parallel from SPEC and/or flags.

    Give any three of global batch, micro-batch, accumulation and world size; the fourth is
    solved. Without a micro-batch, every valid (micro, accumulation) pair is listed.

    Examples:
      $ batchspec plan --global-batch 256 --nnodes 2 --nproc-per-node 8 --tp 2
      $ batchspec plan --global-batch 100 --micro-batch 4 --world-size 8 # exit 1
    """
    from translator import solve
    from translator.advice import general_findings
    from translator.findings import located
    from translator.plugin.registry import get_many
    from translator.spec_file import FLAGS, build_spec, load_spec, source_name

    values = pop_spec_values(params)
    # Each field's flag as this command spells it, for messages about a flag's value.
    flags = {p.name: p.opts[0] for p in click.get_current_context().command.params if p.name}
    if world_sizes is not None:
        from translator.elastic_report import plan_world_sizes

        report, lines = plan_world_sizes(spec_file, values, flags, world_sizes, max_micro)
        if as_json:
            emit_json(report)
        else:
            click.echo("\n".join(lines))
        return
    if max_micro is not None:
        raise InputError("--max-micro is for --world-sizes")
    spec = (
        load_spec(spec_file, values, flags) if spec_file else build_spec(values, FLAGS, flags=flags)
    )
    findings = general_findings(spec)
    if targets:
        frameworks = get_many(targets)
        if spec.is_decided:
            findings += [f for b in frameworks for f in b.check(spec)]
    if spec_file:  # what is found is about the file's spec
        findings = located(findings, source_name(spec_file))
    options = None
    if not spec.is_decided:
        options = solve.decompositions(spec.global_batch, spec.data_parallel)

    if as_json:
        out = spec.output() | {"findings": [f.as_dict() for f in findings]}
        if options is not None:
            out["options"] = [
                {"micro_batch_size": m, "gradient_accumulation_steps": a} for m, a in options
            ]
        emit_json(out)
    else:
        print_table([(k.replace("_", " "), v) for k, v in spec.output().items()])
        if options is not None:
            click.echo(
                f"micro-batch × accumulation options for global {spec.global_batch_size} "
                f"at data-parallel {spec.data_parallel_size} (largest micro first):"
            )
            click.echo("  " + ", ".join(f"{m}×{a}" for m, a in options))
        print_findings(findings)
    exit_for(findings)
