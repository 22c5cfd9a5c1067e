"""``batchspec convert``: the same batch, written for other frameworks."""

from __future__ import annotations

import click

from translator.cli.batch_options import (
    into_options,
    job_options,
    launch_options,
    pop_job,
)
from translator.cli.command import command
from translator.cli.output import print_into, write_rendered
from translator.edit.render_into import write_into
from translator.render import render_each


@command("convert")
@click.argument("file", metavar="FILE")
@into_options
@launch_options(replaces=True)
@job_options
def convert(
    as_json: bool,
    file: str,
    targets: str,
    out_dir: str | None,
    into: str | None,
    force: bool,
    strict: bool,
    framework: str | None,
    **params,
) -> None:
    """Read FILE (any framework's config, or a job's launch script), then render its batch for
    the --to frameworks.

    A job Slurm runs (#SBATCH lines, srun) is converted into shell scripts that Slurm runs
    alike: its nodes and GPUs a node as #SBATCH lines, srun starting the launcher on each node.
    All files are written or none, and no existing file is replaced without --force. With
    --into the batch keys go into configs you already have instead, every other byte kept as
    update keeps it (a folder: each of its configs a --to framework claims). --tp, --pp and
    --cp replace the sizes FILE sets, keeping its global batch and micro-batch; each file
    names the model FILE trains where its framework can (a torchtitan config function, a
    litgpt model_name or model_config, a nanotron model_config), or says which to pick.

    Examples:
      $ batchspec convert axolotl.yml --to deepspeed --out configs --world-size 16
      $ batchspec convert train.sh --to deepspeed --into ds_config.json
    """
    from translator.batch.node_lines import SlurmJob
    from translator.inspection import inspect_file
    from translator.plugin.registry import get_many
    from translator.words.errors import InputError

    if (out_dir is None) == (into is None):
        raise InputError("give --out or --into, one of them")
    frameworks = get_many(targets)
    launch, run_as = pop_job(params)
    inspection = inspect_file(file, framework, launch, run_as)
    spec, findings = on_given_sizes(inspection, launch)
    if into is not None:
        done, refused = write_into(spec, list(frameworks), into, strict)
        print_into(as_json, spec, done, refused, findings)
        return
    assert out_dir is not None
    at = inspection.reading.slurm
    slurm = None if at is None else SlurmJob(spec.nodes, spec.gpus_per_node, at)
    rendered, refused = render_each(spec, frameworks, file, strict, slurm, inspection.model)
    output = inspection.output() | spec.output()
    write_rendered(as_json, output, rendered, out_dir, force, findings, refused)


#: The parallel sizes of the command line: (spec field, its option).
GIVEN_SIZES = (
    ("tensor_parallel_size", "--tp", "tensor"),
    ("pipeline_parallel_size", "--pp", "pipeline"),
    ("context_parallel_size", "--cp", "context"),
)


def on_given_sizes(inspection, launch):
    """``(spec, findings)``: the source's spec, or where ``--tp``/``--pp``/``--cp`` give
    another size than the file sets, its global batch and micro-batch on those sizes, the
    accumulation re-solved as ``update`` re-solves it (refused, exit 1, where it does not
    divide), with a finding that says so beside the source's."""
    from translator.edit.update import target_spec
    from translator.words.errors import ConfigError
    from translator.words.findings import finding, located

    old = inspection.require_spec()
    given = {field: getattr(launch, field) for field, _, _ in GIVEN_SIZES}
    if all(value in (None, getattr(old, field)) for field, value in given.items()):
        return old, inspection.findings
    flags = " ".join(f"{flag} {given[field]}" for field, flag, _ in GIVEN_SIZES if given[field])
    try:
        new = target_spec(
            inspection,
            global_batch=None,
            micro=None,
            world=None,
            nodes=None,
            gpus_per_node=None,
            tensor=given["tensor_parallel_size"],
            pipeline=given["pipeline_parallel_size"],
            context=given["context_parallel_size"],
        )
    except ConfigError as exc:
        raise ConfigError(
            located(exc.findings, f"{inspection.reading.path} with {flags}")
        ) from None
    moved = ", ".join(
        f"{word} {getattr(old, field)} → {getattr(new, field)} ({flag})"
        for field, flag, word in GIVEN_SIZES
        if getattr(old, field) != getattr(new, field)
    )
    said = finding(
        "convert-layout-changed",
        f"the batch is written on {moved}, not the sizes {inspection.reading.path} sets: "
        f"data-parallel {old.data_parallel} → {new.data_parallel}, accumulation "
        f"{old.accumulation} → {new.accumulation}, global batch {new.global_batch} kept",
    )
    return new, [*inspection.findings, said]
