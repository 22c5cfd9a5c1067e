"""``batchspec plan``: solve a batch layout from flags or a spec file."""

from __future__ import annotations

from pathlib import Path

import click

from translator.cli.batch_options import frameworks_help, pop_spec_values, spec_options
from translator.cli.command import command
from translator.cli.output import emit_json, exit_for, print_findings, print_table
from translator.words.errors import InputError


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
    solved. Without a micro-batch, every valid (micro, accumulation) pair is listed. With the
    nodes known (--nnodes, or --world-size with --nproc-per-node), the lines that launch them
    are printed in each launcher's terms (torchrun, deepspeed, accelerate, litgpt, Slurm).

    Examples:
      $ batchspec plan --global-batch 256 --world-size 32 --nproc-per-node 8 --tp 2
      $ batchspec plan --global-batch 100 --micro-batch 4 --world-size 8 # exit 1
    """
    from translator.batch import solve
    from translator.batch.spec_file import FLAGS, build_spec, load_spec, source_name
    from translator.checks.advice import general_findings
    from translator.plugin.registry import get_many
    from translator.words.findings import located

    values = pop_spec_values(params)
    # Each field's flag as this command spells it, for messages about a flag's value.
    flags = {p.name: p.opts[0] for p in click.get_current_context().command.params if p.name}
    if spec_file:
        _refuse_a_framework_file(spec_file)
    if world_sizes is not None:
        from translator.checks.elastic_report import plan_world_sizes

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

    lines = _node_lines(spec)
    if as_json:
        out = spec.output() | {
            "launch": None if lines is None else [one.as_dict() for one in lines],
            "findings": [f.as_dict() for f in findings],
        }
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
        if lines is not None:
            _print_node_lines(spec, lines)
        print_findings(findings)
    exit_for(findings)


def _refuse_a_framework_file(path: str) -> None:
    """A framework's config or a job is not a spec: said so, with the commands that take it
    (it was "expected a mapping of keys to values, got str")."""
    from translator.batch.spec_file import spec_values
    from translator.inspection import read_file
    from translator.words.files import read_text

    text = read_text(path)
    if path == "-" or spec_values(text, path) is not None or _spec_like(text, path):
        return
    try:
        framework, reading = read_file(path)
    except InputError:
        return  # not a framework's either: the spec's own error says what is wrong
    what = "job" if reading.launcher or reading.definition else "config"
    raise InputError(
        f"{path}: is a {framework.name} {what}, not a batchspec spec: plan takes a spec or "
        f"flags; `batchspec inspect {path}` says its batch, `batchspec update {path} "
        "--world-size N` moves it"
    )


def _spec_like(text: str, path: str) -> bool:
    """A mapping whose keys are spec keys, or which does not parse as one: the spec's own
    errors (a key given twice, an unknown key) say what is wrong with it."""
    from translator.batch.spec_file import parse_mapping, spec_fields

    try:
        values, _ = parse_mapping(text, path)
    except InputError:
        return Path(path).suffix.lower() in (".yaml", ".yml", ".json")
    return bool(set(values) & spec_fields())


def _node_lines(spec):
    """How each launcher writes the spec's nodes × processes a node; None when the spec does
    not split its world into nodes."""
    from translator.batch.node_lines import all_lines
    from translator.plugin.registry import get, names

    if spec.nodes is None or spec.gpus_per_node is None:
        return None
    return all_lines(spec.nodes, spec.gpus_per_node, [get(name) for name in names()])


def _print_node_lines(spec, lines) -> None:
    click.echo(f"launch {spec.nodes} node(s) × {spec.gpus_per_node} processes each:")
    for one in lines:
        click.echo(f"  {one.launcher}:")
        for line in one.lines:
            click.echo(f"    {line}")
        if one.note:
            click.echo(f"    ({one.note})")
