"""``batchspec convert``: the same batch, written for other frameworks."""

from __future__ import annotations

import click

from translator.cli.batch_options import (
    into_options,
    job_options,
    launch_options,
    pop_launch,
    pop_run_as,
)
from translator.cli.command import command
from translator.cli.output import print_into, write_rendered
from translator.edit.render_into import write_into
from translator.render import render_each


@command("convert")
@click.argument("file", metavar="FILE")
@into_options
@launch_options
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
    update keeps it (a folder: each of its configs a --to framework claims).

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
    inspection = inspect_file(file, framework, pop_launch(params), pop_run_as(params))
    spec = inspection.require_spec()
    if into is not None:
        done, refused = write_into(spec, list(frameworks), into, strict)
        print_into(as_json, spec, done, refused, inspection.findings)
        return
    assert out_dir is not None
    at = inspection.reading.slurm
    slurm = None if at is None else SlurmJob(spec.nodes, spec.gpus_per_node, at)
    rendered, refused = render_each(spec, frameworks, file, strict, slurm)
    write_rendered(
        as_json, inspection.output(), rendered, out_dir, force, inspection.findings, refused
    )
