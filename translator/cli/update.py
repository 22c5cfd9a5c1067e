"""``batchspec update``: move a config to a new cluster size or batch, keeping everything else."""

from __future__ import annotations

from pathlib import Path

import click

from translator import frameworks
from translator.cli.batch_options import COUNT, job_options, layout_of, pop_run_as
from translator.cli.command import command
from translator.cli.output import STDOUT, emit_json, printable


@command("update", findings=False)
@click.argument("file", metavar="FILE")
@click.option("--world-size", type=COUNT, help="The new number of processes.")
@click.option(
    "--nnodes",
    type=COUNT,
    help="The new number of nodes (each starting --nproc-per-node processes; default: as many "
    "as the job's nodes start now).",
)
@click.option(
    "--nproc-per-node",
    type=COUNT,
    help="The new processes per node (with --nnodes, or with --world-size: world / N nodes; "
    "default: as the job runs now).",
)
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
    """Re-solve FILE for a new world size or batch; only its batch and launch sizes change.

    A job moves whole: its launch line is edited to start the new world (the literal its
    launcher reads: a flag's value, a variable, a ${X:-8} default), and every file it uses
    whose values change with it (its YAML or arguments file, its DeepSpeed JSON, its
    accelerate config), each by its own framework; all of them are written, or none.
    Without -o/--in-place the new file is printed, or, when several files change, a unified
    diff of them all; -o writes one file, so it refuses an update of several (use
    --in-place). An accelerate config alone is moved to the new world (num_processes is the
    total over num_machines). An update that changes nothing says so and writes nothing. One
    that cannot keep the batch exact, or needs a value the files do not write as a literal,
    is refused (exit 1) saying why, and nothing is written.

    Examples:
      $ batchspec update ds_config.json --world-size 32 --in-place
      $ batchspec update train.sh --world-size 32 --in-place
    """
    from translator.edit.update import update_file
    from translator.words.errors import InputError
    from translator.words.files import write_files

    out_path = None if out_path == STDOUT else out_path
    if out_path and in_place:
        raise InputError("give -o/--out or --in-place, not both")
    if nnodes is None or nproc_per_node is not None or world_size is not None:
        world_size, nnodes = layout_of(world_size, nnodes, nproc_per_node)
    # else: the nodes alone, each starting as many processes as the job's nodes do now
    nproc_per_node = None if nnodes is None or world_size is None else world_size // nnodes
    if file == "-" and in_place:
        raise InputError("--in-place needs a file, not standard input")
    updated = update_file(
        file,
        framework,
        from_world_size,
        pop_run_as(params),
        global_batch=global_batch,
        micro=micro_batch,
        world=None if nnodes is not None else world_size,
        nodes=nnodes,
        gpus_per_node=nproc_per_node,
        tensor=tp,
        pipeline=pp,
        context=cp,
    )
    target = Path(file) if in_place else Path(out_path) if out_path else None
    if updated.others and out_path:
        raise InputError(
            f"-o/--out writes one file, and this update changes "
            f"{len(updated.others) + 1} ({', '.join([file, *(o.path for o in updated.others)])}):"
            " give --in-place to write them all, or leave both out to see the diff"
        )
    written = []
    if target is not None and updated.changed:
        files: list[tuple[Path, str | bytes]] = [(target, updated.text)] if updated.changes else []
        files += [(Path(o.path), o.text) for o in updated.others]
        written = write_files(files, force=force or in_place)
    _show(as_json, file, updated, target, written)


def _show(as_json: bool, file: str, updated, target: Path | None, written: list) -> None:
    """What the update did (or, without a target, the new file or the diff of all files)."""
    unchanged = None if updated.changed else f"{file}: {updated.already()}"
    if as_json:
        emit_json(
            updated.inspection.output()
            | {
                "changes": [c.as_dict() for c in updated.changes],
                "other_files": [o.as_dict(with_text=target is None) for o in updated.others],
                "nothing_to_change": unchanged,
                "notes": updated.notes,
                "written": str(target) if written and updated.changes else None,
                **({"text": updated.text} if target is None else {}),
            }
        )
        return
    if unchanged is not None:  # on stderr when stdout would carry the new file
        click.echo(printable(unchanged), err=target is None)
    elif target is None and updated.others:
        click.echo(job_diff(file, updated), nl=False)
    elif target is None:
        click.echo(updated.text, nl=False)
        for change in updated.changes:  # what changed, beside the new file
            click.echo(printable(change.describe(Path(file))), err=True)
    else:
        _report(target, updated, written)
    for note in updated.notes:  # on stderr when stdout carries the new file
        click.echo(printable(f"note: {note}"), err=target is None)


def _report(target: Path, updated, written) -> None:
    """One line per change, file by file; where a symlink led a write."""
    for change in updated.changes:
        click.echo(printable(change.describe(target)))
    for other in updated.others:
        for change in other.changes:
            click.echo(printable(change.describe(other.path)))
    for w in written:
        if w.target != w.path:
            click.echo(f"wrote {w.describe()}")


def job_diff(file: str, updated) -> str:
    """A unified diff of every file the update changes (what --in-place would write)."""
    import difflib

    from translator.words.files import read_text

    out: list[str] = []
    pairs = [(file, updated.text)] if updated.changes else []
    for path, text in [*pairs, *((o.path, o.text) for o in updated.others)]:
        out += difflib.unified_diff(
            read_text(path).splitlines(keepends=True),
            text.splitlines(keepends=True),
            f"a/{path}",
            f"b/{path}",
        )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out
    )
