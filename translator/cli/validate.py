"""``batchspec validate``: findings only, grouped by file; exit 1 on any error."""

from __future__ import annotations

import dataclasses

import click

from translator.checks.inspect_files import inspect_files
from translator.cli.batch_options import job_options, launch_options, pop_job
from translator.cli.command import command
from translator.cli.output import (
    DEBUG,
    QUIET,
    FindingsPrinter,
    asked,
    emit_json,
    exit_code,
    print_unusable,
    printable,
)
from translator.words.findings import Finding


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
    "--strict",
    is_flag=True,
    help="Count every warning as an error (exit 1; printed, and in --json, as one), for CI.",
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
    strict: bool,
    skip_other_files: bool,
    **params,
) -> None:
    """Check configs for batch mistakes, with the fix for each: exit 1 on any error (with
    --strict, on any warning too), 2 when a file cannot be used.

    Examples:
      $ batchspec validate ds_config.json axolotl.yml --world-size 16 -q --strict
      $ batchspec validate ds_config.json --world-size 16 --with-framework
    """
    launch, run_as = pop_job(params)
    inspections, unusable = inspect_files(files, framework, launch, skip_other_files, run_as)
    print_unusable(unusable)
    if with_framework:
        from translator.checks.verdict import framework_verdict
        from translator.words.chatter import framework_output

        with framework_output(shown=asked(DEBUG)):
            for i in inspections:
                i.findings.append(framework_verdict(i))
    if strict:
        for i in inspections:
            i.findings[:] = [as_error(f) for f in i.findings]
    if as_json:
        emit_json({"files": [i.output() for i in inspections] + unusable})
    else:
        printer = FindingsPrinter([i.findings for i in inspections])
        for i in inspections:
            errors = sum(f.severity == "error" for f in i.findings)
            if errors or not asked(QUIET):
                click.echo(
                    printable(
                        f"{i.reading.path} ({i.reading.framework}): "
                        f"{'ok' if not errors else f'{errors} error(s)'}"
                    )
                )
            printer.print(i.findings)
    raise SystemExit(exit_code(inspections, unusable))


def as_error(f: Finding) -> Finding:
    """A warning made an error (``--strict``); an error or info as it is."""
    return dataclasses.replace(f, severity="error") if f.severity == "warning" else f
