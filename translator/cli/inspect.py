"""``batchspec inspect``: the truth about the batch in configs people already have."""

from __future__ import annotations

import click

from translator.checks.inspect_files import inspect_files
from translator.cli.batch_options import job_options, launch_options, pop_job
from translator.cli.command import command
from translator.cli.output import (
    FindingsPrinter,
    emit_json,
    exit_code,
    print_sources,
    print_table,
    print_unusable,
    printable,
)


@command("inspect")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@launch_options
@job_options
@click.option(
    "--model-config",
    type=click.Path(dir_okay=True, path_type=str),
    help="The model's config.json (or its folder), for a job whose model is not found here.",
)
def inspect(
    as_json: bool,
    files: tuple[str, ...],
    framework: str | None,
    model_config: str | None,
    **params,
) -> None:
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
    launch, run_as = pop_job(params)
    inspections, unusable = inspect_files(files, framework, launch, run_as=run_as)
    print_unusable(unusable)
    if model_config is not None:
        from translator.model.named_model import resolve

        for i in inspections:
            i.model = resolve(i.reading, model_config)
    if as_json:
        outputs = [i.output() for i in inspections] + unusable
        emit_json(outputs[0] if len(files) == 1 else {"files": outputs})
    else:
        printer = FindingsPrinter([i.findings for i in inspections])
        for i in inspections:
            out = i.output()
            click.echo(printable(f"{out.pop('file')} ({out.pop('framework')})"))
            model = out.pop("model")
            if model is not None:
                click.echo(printable(_model_line(model)))
            definition = out.pop("job_definition", None)
            if definition is not None:
                click.echo(printable(_definition_line(definition)))
            out.pop("findings")
            out.pop("sources")
            print_table([(k.replace("_", " "), v) for k, v in out.items()])
            print_sources(i.reading.sources)
            printer.print(i.findings)
    raise SystemExit(exit_code(inspections, unusable))


def _model_line(model: dict) -> str:
    """``model: LlamaForCausalLM, 8,030,261,248 parameters (from PATH)``, or why it is unknown."""
    if model["parameters"] is None:
        return f"model: {model['named']}: unknown ({model['why']})"
    return (
        f"model: {model['architecture']}, {model['parameters']:,} parameters "
        f"(from {model['source']})"
    )


def _definition_line(definition: dict) -> str:
    """``job definition: Kubeflow PyTorchJob (pytorch): 2 nodes × 8 GPUs``, "-" where unknown."""
    name = f" ({definition['name']})" if definition["name"] else ""
    nodes, gpus = (
        "-" if definition[k] is None else definition[k] for k in ("nodes", "gpus_per_node")
    )
    return f"job definition: {definition['kind']}{name}: {nodes} node(s) × {gpus} GPU(s) each"
