"""``batchspec update``: move a config to a new cluster size or batch, keeping everything else."""

from __future__ import annotations

from pathlib import Path

import click

from translator import frameworks
from translator.cli.common import (
    COUNT,
    STDOUT,
    command,
    emit_json,
    job_options,
    pop_run_as,
)


@command("update", findings=False)
@click.argument("file", metavar="FILE")
@click.option("--world-size", type=COUNT, help="The new number of processes.")
@click.option("--nnodes", type=COUNT, help="The new number of nodes (with --nproc-per-node).")
@click.option("--nproc-per-node", type=COUNT, help="The new processes per node.")
@click.option("--global-batch", type=COUNT, help="A new global batch (default: keep it).")
@click.option("--micro-batch", type=COUNT, help="A new micro-batch (default: keep it).")
@click.option("--tp", type=COUNT, help="A new tensor-parallel size.")
@click.option("--pp", type=COUNT, help="A new pipeline-parallel size.")
@click.option("--cp", type=COUNT, help="A new context-parallel size.")
@click.option(
    "--from-world-size",
    type=COUNT,
    help="The world size the file runs on now, when the file does not say.",
)
@click.option(
    "--framework",
    type=click.Choice(frameworks.names()),
    help="Read FILE as this framework's (default: detect).",
)
@click.option(
    "-o",
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    help="Write the updated config here (-: on stdout, as without it).",
)
@click.option(
    "--in-place",
    is_flag=True,
    help="Replace FILE atomically, keeping its mode and owner (a symlink: its target).",
)
@click.option("--force", is_flag=True, help="Let --out replace an existing file.")
@job_options
def update(
    as_json: bool,
    file: str,
    world_size,
    nnodes,
    nproc_per_node,
    global_batch,
    micro_batch,
    tp,
    pp,
    cp,
    from_world_size,
    framework,
    out_path,
    in_place,
    force,
    **params,
) -> None:
    """Re-solve FILE's accumulation for a new world size or batch; only batch values change.

    Without -o/--in-place the new file is printed. An update that cannot keep the batch exact
    is refused (exit 1) with the options, and nothing is written.

    Examples:
      $ batchspec update ds_config.json --world-size 32 --in-place
      $ batchspec update axolotl.yml --from-world-size 8 --world-size 16
    """
    from translator.errors import InputError
    from translator.files import write_files
    from translator.update import update_file

    out_path = None if out_path == STDOUT else out_path
    if out_path and in_place:
        raise InputError("give -o/--out or --in-place, not both")
    if (nnodes is None) != (nproc_per_node is None):
        raise InputError("give both --nnodes and --nproc-per-node")
    if file == "-" and in_place:
        raise InputError("--in-place needs a file, not standard input")
    new_text, changes, again = update_file(
        file,
        framework,
        from_world_size,
        pop_run_as(params),
        global_batch=global_batch,
        micro=micro_batch,
        world=world_size,
        nodes=nnodes,
        gpus_per_node=nproc_per_node,
        tensor=tp,
        pipeline=pp,
        context=cp,
    )
    target = Path(file) if in_place else Path(out_path) if out_path else None
    written = None
    if target is not None:
        (written,) = write_files([(target, new_text)], force=force or in_place)
    if as_json:
        emit_json(
            again.output()
            | {
                "changes": [c.as_dict() for c in changes],
                "written": None if target is None else str(target),
                **({"text": new_text} if target is None else {}),
            }
        )
    elif target is None:
        click.echo(new_text, nl=False)
    elif written is not None:
        for c in changes:
            click.echo(f"{target}:{c.line or '+'}: {c.key} {c.old} → {c.new}")
        if written.target != written.path:
            click.echo(f"wrote {written.describe()}")
