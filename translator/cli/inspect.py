"""``batchspec inspect``: the truth about the batch in configs people already have."""

from __future__ import annotations

import click

from translator.cli.common import (
    command,
    emit_json,
    launch_options,
    pop_launch,
    print_findings,
    print_table,
    printable,
)


def inspect_all(files, framework, launch, skip_others: bool = False):
    """``(inspections, unusable)``: each readable file inspected; each unusable one's error.
    With ``skip_others``, files that hold no batch settings are passed over."""
    from translator.errors import InputError
    from translator.files import read_text
    from translator.inspection import inspect_together, is_batch_config, read_file

    loaded, unusable = [], []
    for path in files:
        try:
            if skip_others and not is_batch_config(path, read_text(path), framework):
                continue
            loaded.append(read_file(path, framework))
        except InputError as exc:
            if len(files) == 1:
                raise
            click.echo(f"batchspec: error: {printable(exc)}", err=True)
            unusable.append({"file": path, "error": str(exc)})
    return inspect_together(loaded, launch), unusable


def exit_code(inspections, unusable) -> int:
    if unusable:
        return 2
    return 1 if any(f.severity == "error" for i in inspections for f in i.findings) else 0


@command("inspect")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@launch_options
def inspect(as_json: bool, files: tuple[str, ...], framework: str | None, **params) -> None:
    """Resolve the batch of framework configs: DeepSpeed JSON, Axolotl, HF Trainer, LLaMA-Factory
    and accelerate YAML, Megatron launch scripts (and any plugin framework).

    Unknown values are shown as null/-; every finding names its file and line.
    """
    launch = pop_launch(params)
    inspections, unusable = inspect_all(files, framework, launch)
    if as_json:
        outputs = [i.output() for i in inspections] + unusable
        emit_json(outputs[0] if len(files) == 1 else {"files": outputs})
    else:
        for i in inspections:
            out = i.output()
            click.echo(printable(f"{out.pop('file')} ({out.pop('framework')})"))
            out.pop("findings")
            print_table([(k.replace("_", " "), v) for k, v in out.items()])
            print_findings(i.findings)
    raise SystemExit(exit_code(inspections, unusable))
