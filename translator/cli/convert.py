"""``batchspec convert``: the same batch, written for other frameworks."""

from __future__ import annotations

from pathlib import Path

import click

from translator.cli.common import command, emit_json, launch_options, pop_launch, print_findings


@command("convert")
@click.argument("file", metavar="FILE")
@click.option("--to", "targets", required=True, metavar="BACKENDS",
              help="Comma-separated frameworks: deepspeed,axolotl,megatron.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write into (created when missing).")
@click.option("--force", is_flag=True, help="Overwrite files that already exist.")
@launch_options
def convert(as_json: bool, file: str, targets: str, out_dir: str, force: bool,
            framework: str | None, **params) -> None:
    """Read FILE (any framework's config), then render its batch for the --to frameworks."""
    from translator.backends import get_backends
    from translator.errors import ConfigError, InputError
    from translator.files import check_writable, write_atomic
    from translator.inspection import inspect_file
    from translator.render import render

    backends = get_backends(targets)
    inspection = inspect_file(file, framework, pop_launch(params))
    errors = [f for f in inspection.findings if f.severity == "error"]
    if errors:
        raise ConfigError(errors)
    spec = inspection.spec
    if spec is None or not spec.is_decided:
        raise InputError(f"{file}: its batch is not fully known "
                         f"({'; '.join(f.message for f in inspection.findings if f.severity == 'warning') or 'see inspect'}); "
                         "give --world-size")
    rendered = [render(spec, b) for b in backends]
    paths = [Path(out_dir) / r.filename for r in rendered]
    check_writable(paths, force)
    for r, path in zip(rendered, paths):
        write_atomic(path, r.text)
    findings = [f for r in rendered for f in r.findings]
    if as_json:
        emit_json(inspection.output() | {
            "files": {r.backend: str(p) for r, p in zip(rendered, paths)},
            "findings": [f.as_dict() for f in inspection.findings + findings]})
    else:
        for p in paths:
            click.echo(f"wrote {p}")
        print_findings(findings)
