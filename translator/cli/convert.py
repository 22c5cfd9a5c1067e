"""``batchspec convert``: the same batch, written for other frameworks."""

from __future__ import annotations

import click

from translator.cli.common import (
    command,
    job_options,
    launch_options,
    output_options,
    pop_launch,
    pop_run_as,
    render_each,
    write_rendered,
)


@command("convert")
@click.argument("file", metavar="FILE")
@output_options
@launch_options
@job_options
def convert(
    as_json: bool,
    file: str,
    targets: str,
    out_dir: str,
    force: bool,
    strict: bool,
    framework: str | None,
    **params,
) -> None:
    """Read FILE (any framework's config, or a job's launch script), then render its batch for
    the --to frameworks.

    All files are written or none, and no existing file is replaced without --force.

    Examples:
      $ batchspec convert axolotl.yml --to deepspeed --out configs --world-size 16
      $ batchspec convert train.sh --to all --out configs --env NNODES=2
    """
    from translator.inspection import inspect_file
    from translator.plugin.registry import get_many

    frameworks = get_many(targets)
    inspection = inspect_file(file, framework, pop_launch(params), pop_run_as(params))
    spec = inspection.require_spec()
    rendered, refused = render_each(spec, frameworks, file, strict)
    write_rendered(
        as_json, inspection.output(), rendered, out_dir, force, inspection.findings, refused
    )
