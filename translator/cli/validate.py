"""``batchspec validate``: findings only, grouped by file; exit 1 on any error."""

from __future__ import annotations

import click

from translator.cli.common import (
    command,
    emit_json,
    exit_code,
    inspect_all,
    job_options,
    launch_options,
    pop_launch,
    pop_run_as,
    print_findings,
)


@command("validate")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@launch_options
@job_options
@click.option(
    "--with-framework",
    is_flag=True,
    help="Also run the framework's own validator where it is installed.",
)
@click.option(
    "--skip-other-files",
    is_flag=True,
    help="Pass over files that hold no batch settings (for pre-commit, which hands "
    "over every JSON, YAML and shell file).",
)
def validate(
    as_json: bool,
    files: tuple[str, ...],
    framework: str | None,
    with_framework: bool,
    skip_other_files: bool,
    **params,
) -> None:
    """Check configs for batch mistakes, with the fix for each."""
    launch = pop_launch(params)
    run_as = pop_run_as(params)
    inspections, unusable = inspect_all(files, framework, launch, skip_other_files, run_as)
    if with_framework:
        from translator.verdict import framework_verdict

        for i in inspections:
            i.findings.append(framework_verdict(i))
    if as_json:
        emit_json(
            {
                "files": [
                    {
                        "file": i.reading.path,
                        "framework": i.reading.framework,
                        "findings": [f.as_dict() for f in i.findings],
                    }
                    for i in inspections
                ]
                + unusable
            }
        )
    else:
        for i in inspections:
            errors = sum(f.severity == "error" for f in i.findings)
            click.echo(
                f"{i.reading.path} ({i.reading.framework}): "
                f"{'ok' if not errors else f'{errors} error(s)'}"
            )
            print_findings(i.findings)
    raise SystemExit(exit_code(inspections, unusable))
