"""``batchspec inspect``: the truth about the batch in configs people already have."""

from __future__ import annotations

import click

from translator.cli.common import (
    FindingsPrinter,
    command,
    emit_json,
    exit_code,
    inspect_all,
    job_options,
    launch_options,
    pop_launch,
    pop_run_as,
    print_sources,
    print_table,
    printable,
)


@command("inspect")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@launch_options
@job_options
def inspect(as_json: bool, files: tuple[str, ...], framework: str | None, **params) -> None:
    """Resolve the batch of framework configs and jobs: DeepSpeed JSON, Axolotl, HF Trainer,
    LLaMA-Factory and accelerate YAML, and launch scripts of any of them (and of any plugin
    framework), read with the files they name.

    A launch script is read as it runs with no arguments in an environment that sets nothing:
    give its arguments after -- (inspect job.sh -- --mbs 2) and variables with --env. Unknown
    values are shown as null/-; every finding names its file and line.

    Examples:
      $ batchspec inspect ds_config.json --world-size 16
      $ batchspec inspect train.sh --env NNODES=2
    """
    launch = pop_launch(params)
    run_as = pop_run_as(params)
    inspections, unusable = inspect_all(files, framework, launch, run_as=run_as)
    if as_json:
        outputs = [i.output() for i in inspections] + unusable
        emit_json(outputs[0] if len(files) == 1 else {"files": outputs})
    else:
        printer = FindingsPrinter([i.findings for i in inspections])
        for i in inspections:
            out = i.output()
            click.echo(printable(f"{out.pop('file')} ({out.pop('framework')})"))
            out.pop("findings")
            out.pop("sources")
            print_table([(k.replace("_", " "), v) for k, v in out.items()])
            print_sources(i.reading.sources)
            printer.print(i.findings)
    raise SystemExit(exit_code(inspections, unusable))
