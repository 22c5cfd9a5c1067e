"""``batchspec tune``: the fastest micro-batch that keeps the global batch exact, probed on the
real engine (the run itself is :func:`translator.launch.tune.tune`)."""

from __future__ import annotations

import dataclasses
import sys

import click

from translator.cli.batch_options import folder_not_stdout, frameworks_help
from translator.cli.command import command
from translator.cli.output import emit_json, print_findings
from translator.cli.run_options import (
    engine_options,
    given_options,
    parse_memory,
    pop_slurm,
    run_options,
)


@command("tune", stoppable=True)
@click.argument("file", metavar="FILE")
@engine_options
@click.option(
    "--steps",
    type=click.IntRange(min=3),
    default=4,
    show_default=True,
    help="Optimizer steps per probe: the first is warm-up, the others are timed (their median "
    "decides, their spread is reported).",
)
@click.option(
    "--recompute",
    is_flag=True,
    help="Also try activation recomputation when micro-batch 1 does not fit (torch engine).",
)
@click.option(
    "--zero-stages",
    metavar="STAGES",
    help="DeepSpeed: ZeRO stages to try, lowest first, e.g. 0,1,2 (a higher one only "
    "when micro-batch 1 does not fit the one before).",
)
@click.option(
    "--threshold",
    type=click.FloatRange(min=0, max=1),
    default=0.03,
    show_default=True,
    help="Tokens/s gain below which a larger micro-batch counts as no better.",
)
@click.option(
    "--probe-timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds one probe may take, start-up included: a probe whose rank hangs is stopped, "
    "every process of it (a Slurm job step cancelled), and the tune ends (exit 1).",
)
@run_options
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    callback=folder_not_stdout,
    help="Write the picked layout here, rendered for --to (a folder: stdout has the table).",
)
@click.option(
    "--to",
    "targets",
    metavar="FRAMEWORKS",
    help=frameworks_help("Frameworks to render the pick for (default: the tuned one)"),
)
@click.option("--force", is_flag=True, help="Replace files in --out.")
@click.option(
    "--write",
    is_flag=True,
    help="Write the pick into FILE itself (a config or a job, and the files it uses) as "
    "update --micro-batch edits them, every other byte kept.",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    help="Write tokens/s and peak memory against micro-batch as a PNG (needs the "
    "plot extra: matplotlib).",
)
@click.option(
    "--parity/--no-parity",
    default=None,
    help="Check the pick with smoke --parity against FILE's own micro-batch × accumulation "
    "(one optimizer step each, loss and update compared); exit 1 when they differ "
    "[default: on when FILE gives a split and the engine checks parity].",
)
@click.option(
    "--in-allocation",
    is_flag=True,
    hidden=True,
    help="Run inside a Slurm allocation, probes as job steps (what --slurm submits).",
)
def tune(as_json: bool, file: str, memory_limit, overhead, **params) -> None:
    """Find the fastest micro-batch for FILE's global batch (a spec or a framework config).

    The candidates are the divisors of global / data-parallel, so each keeps the global batch
    exact; the memory estimate ranks them, the real engine probes them (the smoke harness: each
    probe's samples per step must be the global batch), bisecting for the out-of-memory edge and
    climbing toward the fastest, in at most ceil(log2 d) + 2 probes.

    Examples:
      $ batchspec tune spec.yaml --nproc-per-node 2 --steps 3 --model tiny --out best --to all
    """
    from translator.launch import tune as tuner
    from translator.launch.progress import Progress
    from translator.launch.request import RunRequest
    from translator.words.findings import Finding

    slurm = pop_slurm(params)
    asked = {f.name for f in dataclasses.fields(RunRequest)}
    run = RunRequest(
        file,
        memory_limit=parse_memory(memory_limit),
        **{name: params.pop(name) for name in list(params) if name in asked},
    )
    request = tuner.Request(
        run=run,
        overhead=parse_memory(overhead, "--overhead"),
        slurm=slurm,
        as_json=as_json,
        command_line=given_options(),
        **params,
    )
    outcome = tuner.tune(request, Progress())
    if as_json:
        emit_json(outcome.output)
    else:
        click.echo(outcome.text)
        for change in outcome.output.get("changes", []):  # what --write changed, as update says
            click.echo(change, err=True)
        print_findings([Finding(**f) for f in outcome.output.get("findings", [])])
    if outcome.error:
        click.echo(f"batchspec: error: {outcome.error}", err=True)
    if outcome.exit_code:
        sys.exit(outcome.exit_code)
