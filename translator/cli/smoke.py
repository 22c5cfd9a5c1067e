"""``batchspec smoke``: a few real optimizer steps that prove the batch."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from translator.cli.common import COUNT, command, emit_json, print_findings, print_table
from translator.launch.engines import engine_names

MEMORY = re.compile(r"^(\d+)([KMGT]?)$")


def parse_memory(value: str | None, option: str = "--memory-limit") -> int | None:
    """Bytes from ``4G``, ``512M``, ``1024``; ``option`` names the flag in the error."""
    from translator.errors import InputError

    if value is None:
        return None
    m = MEMORY.match(value.strip().upper())
    if not m or int(m.group(1)) == 0:
        raise InputError(
            f"{option} {value!r}: give a positive number of bytes, or a number with K, M, G or T"
        )
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " ")


def engine_options(fn):
    """What runs where: the engine, the ranks, the model, the limits and Slurm's requests
    (shared by smoke and tune)."""
    options = [
        click.option(
            "--framework",
            type=click.Choice(engine_names()),
            help="Engine (default: the config's own framework; torch for a spec).",
        ),
        click.option(
            "--nproc", type=COUNT, default=1, show_default=True, help="Processes per node."
        ),
        click.option("--nnodes", type=COUNT, default=1, show_default=True, help="Nodes."),
        click.option(
            "--seq-len",
            type=COUNT,
            help="Tokens per sample (default: the config's, else 64 for tiny, 1024 for 125m).",
        ),
        click.option(
            "--model",
            type=click.Choice(["tiny", "125m"]),
            default="tiny",
            show_default=True,
            help="A GPT-style model built in code with random weights.",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            help="Seconds before the run is stopped (exit 1, nothing left running).",
        ),
        click.option(
            "--memory-limit", help="Cap each rank's address space (e.g. 4G), to see what fits."
        ),
        click.option(
            "--workdir",
            type=click.Path(file_okay=False, path_type=Path),
            help="Folder for the config and the ranks' results (shared across nodes; "
            "default: .batchspec-<command>/<framework>).",
        ),
        click.option(
            "--slurm", "use_slurm", is_flag=True, help="Submit with sbatch instead of running here."
        ),
        click.option("--partition", help="Slurm partition."),
        click.option("--account", help="Slurm account."),
        click.option("--time", "time_limit", help="Slurm time limit, e.g. 0:30:00."),
        click.option(
            "--sbatch", "sbatch_extra", multiple=True, help="Extra #SBATCH option (repeatable)."
        ),
        click.option(
            "--setup", multiple=True, help="Shell line run before the launch (repeatable)."
        ),
        click.option(
            "--device",
            type=click.Choice(["gpu", "cpu"]),
            help="Where the ranks compute (default: a GPU when this machine has one; "
            "with --slurm, gpu: compute nodes have GPUs that login nodes lack).",
        ),
        click.option(
            "--gpus-per-node",
            type=COUNT,
            help="GPUs Slurm gives each node (default with --device gpu: --nproc).",
        ),
        click.option(
            "--cpus-per-task",
            type=COUNT,
            help="CPUs Slurm gives each node's task (default: the partition's cores).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def slurm_options(
    use_slurm, partition, account, time_limit, sbatch_extra, setup, gpus_per_node, cpus_per_task
):
    """The checked :class:`SlurmOptions` of the shared flags."""
    from translator.errors import InputError
    from translator.launch import slurm

    if not use_slurm and (gpus_per_node or cpus_per_task):
        raise InputError(
            "--gpus-per-node and --cpus-per-task are requests to Slurm: use them with --slurm"
        )
    options = slurm.SlurmOptions(
        partition,
        account,
        time_limit,
        list(sbatch_extra),
        list(setup),
        gpus_per_node,
        cpus_per_task,
    )
    options.validate()
    return options


@command("smoke")
@click.argument("file", metavar="FILE")
@engine_options
@click.option("--steps", type=COUNT, default=3, show_default=True, help="Optimizer steps.")
@click.option(
    "--rdzv-endpoint",
    metavar="HOST:PORT",
    help="Rendezvous of a multi-node run started outside Slurm (with --dry-run).",
)
@click.option("--dry-run", is_flag=True, help="Print exactly what would run; run nothing.")
@click.option(
    "--expect-global",
    type=COUNT,
    metavar="N",
    help="The global batch you believe the file gives: exit 1 when the engine "
    "consumes another number of samples per optimizer step.",
)
def smoke(
    as_json: bool,
    file: str,
    framework,
    nproc,
    nnodes,
    steps,
    seq_len,
    model,
    timeout,
    memory_limit,
    workdir,
    rdzv_endpoint,
    dry_run,
    use_slurm,
    partition,
    account,
    time_limit,
    sbatch_extra,
    setup,
    device,
    gpus_per_node,
    cpus_per_task,
    expect_global,
) -> None:
    """Run a few real optimizer steps of FILE (a spec or a framework config) and count the
    samples every optimizer step consumes; exit 1 unless each is exactly the global batch
    (and, with --expect-global N, N)."""
    from translator.errors import ConfigError, InputError
    from translator.launch import smoke as runs

    limit = parse_memory(memory_limit)
    options = slurm_options(
        use_slurm, partition, account, time_limit, sbatch_extra, setup, gpus_per_node, cpus_per_task
    )
    device = runs.resolve_device(device, use_slurm)
    workdir = (workdir or Path(".batchspec-smoke") / (framework or "run")).resolve()
    if nnodes > 1 and not use_slurm and not (dry_run and rdzv_endpoint):
        raise InputError(
            "a multi-node run outside Slurm starts on every node: print its command "
            "with --dry-run --rdzv-endpoint HOST:PORT, or use --slurm"
        )
    prepared = runs.prepare(
        file,
        framework,
        nproc,
        nnodes,
        steps,
        model,
        seq_len,
        workdir,
        rdzv_endpoint,
        device,
        expect_global,
    )
    if dry_run:
        return _dry_run(prepared, options, use_slurm, as_json)
    say = (lambda text: None) if as_json else (lambda text: click.echo(text, err=True))
    say(
        f"smoke: {prepared.plan.framework} on {device}, {nnodes} node(s) × {nproc}, {steps} steps, "
        f"global batch {prepared.spec.global_batch_size}, workdir {workdir}"
    )
    job = state = None
    if use_slurm:
        stopped, tail, job, state = runs.run_slurm(prepared, options, timeout, limit, say)
    else:
        stopped, tail = runs.run_local(prepared, timeout, limit, step_progress(say, steps))
    report = runs.judge(prepared, stopped, timeout, tail)
    mfu, formula = runs.mfu(report, prepared)
    m = report.measurement
    out = prepared.spec.output() | {
        "framework": prepared.plan.framework,
        "optimizer_steps": m.optimizer_steps,
        "samples_per_optimizer_step": m.samples_per_optimizer_step,
        "tokens_per_second": m.tokens_per_second,
        "step_time_seconds": m.step_time_seconds,
        "peak_memory_bytes": m.peak_memory_bytes,
        "device": m.device,
        "stepped_by": m.stepped_by,
        "mfu": mfu,
        "mfu_formula": formula,
        "workdir": str(workdir),
        "slurm_job": job,
        "expect_global": expect_global,
        "errors": report.errors,
        "findings": [f.as_dict() for f in prepared.findings],
    }
    if as_json:
        emit_json(out)
    else:
        _table(out)
        print_findings(prepared.findings)
    if report.errors:
        click.echo(f"batchspec: error: {'; '.join(report.errors)}", err=True)
        sys.exit(130 if stopped == "interrupted" else ConfigError.exit_code)


def step_progress(say, steps):
    from translator.launch.harness import PROGRESS

    # Ranks share one output stream, so a progress line may arrive glued to another line.
    pattern = re.compile(rf"{re.escape(PROGRESS)} rank 0 step (\d+)")

    def on_line(line: str) -> None:
        for step in pattern.findall(line):
            say(f"  optimizer step {step}/{steps}")

    return on_line


def _dry_run(prepared, options, use_slurm, as_json) -> None:
    from translator.launch import command as commands
    from translator.launch import slurm

    plan = prepared.plan
    argv = commands.local_command(plan)
    sbatch = slurm.script(plan, options) if use_slurm else None
    submit = slurm.submit_command(plan, str(plan.workdir / "smoke.sbatch")) if use_slurm else None
    if as_json:
        emit_json(
            prepared.spec.output()
            | {
                "framework": plan.framework,
                "command": argv,
                "sbatch": sbatch,
                "submit": submit,
                "workdir": str(plan.workdir),
            }
        )
        return
    import shlex

    click.echo(f"# would write {plan.workdir}/spec.json and {plan.workdir}/{plan.config_name}")
    if sbatch:
        click.echo(f"# and {plan.workdir}/smoke.sbatch, submitted as: {shlex.join(submit)}")
    click.echo(sbatch if sbatch else shlex.join(argv))


def _table(out: dict) -> None:
    def mem(n):
        return f"{n / 2**20:.0f} MiB" if n else None

    rows = [
        ("global batch", out["global_batch_size"]),
        ("micro-batch", out["micro_batch_size"]),
        ("accumulation", out["gradient_accumulation_steps"]),
        ("data-parallel", out["data_parallel_size"]),
        ("world", out["world_size"]),
        ("optimizer steps", out["optimizer_steps"]),
        ("samples per step", ", ".join(map(str, out["samples_per_optimizer_step"]))),
        (
            "tokens/s",
            None if out["tokens_per_second"] is None else f"{out['tokens_per_second']:,.0f}",
        ),
        (
            "median step",
            None if out["step_time_seconds"] is None else f"{out['step_time_seconds']:.3f} s",
        ),
        ("peak memory", mem(out["peak_memory_bytes"])),
        ("device", out["device"]),
        ("stepped by", out["stepped_by"] or "?"),
    ]
    if out["mfu"] is not None:
        rows.append(("MFU", f"{out['mfu']:.1%} ({out['mfu_formula']})"))
    print_table(rows, title=f"smoke ({out['framework']})")
