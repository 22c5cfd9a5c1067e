"""``batchspec smoke``: a few real optimizer steps that prove the batch."""

from __future__ import annotations

import dataclasses
import os
import sys

import click

from translator.cli.batch_options import COUNT
from translator.cli.command import INTERRUPTED, command
from translator.cli.output import emit_json, print_findings, print_table, printable
from translator.cli.run_options import engine_options, parse_memory, pop_launcher


@command("smoke", stoppable=True)
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
@click.option(
    "--parity",
    metavar="B",
    help="Run FILE's global batch twice, as FILE says and as B says, and compare the first "
    "optimizer step's loss and update: B is a second config or spec of the same job, or "
    "overrides of FILE that keep its global batch (micro=2, nproc=1, micro=2,nproc=1); exit 1 "
    "when they differ beyond --tolerance.",
)
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0, min_open=True),
    metavar="X",
    help="With --parity: the largest relative difference accepted (default: 1e-3 on CPU, "
    "3e-2 on GPU; see docs/guide.md).",
)
def smoke(as_json: bool, file: str, memory_limit, parity, tolerance, **options) -> None:
    """Run a few real optimizer steps of FILE (a spec or a framework config) and count the
    samples every optimizer step consumes; exit 1 unless each is exactly the global batch
    (and, with --expect-global N, N). With --parity B, run one step as FILE says and one as B
    says and exit 1 unless their loss and update agree.

    Examples:
      $ batchspec smoke spec.yaml --nproc-per-node 2 --parity micro=1,nproc=1
      $ batchspec smoke spec.yaml --nproc-per-node 2 --slurm --device cpu --dry-run
    """
    from translator.launch import preparing
    from translator.launch.request import RunRequest
    from translator.words.errors import InputError

    launcher = pop_launcher(options)  # the rest: what runs, asked once for every run below
    request = RunRequest(
        file, memory_limit=parse_memory(memory_limit), remote=launcher.remote, **options
    )
    given = click.get_current_context().get_parameter_source("nnodes")
    if launcher.remote and given is click.core.ParameterSource.DEFAULT:
        # a scheduler starts the job's own nodes, each its processes: the world it launches
        read = request.read()
        request = dataclasses.replace(request, nnodes=preparing.job_nodes(read), source=read)
    if (
        request.nnodes > 1
        and not launcher.remote
        and not (request.dry_run and request.rdzv_endpoint)
    ):
        raise InputError(
            "a multi-node run outside a scheduler starts on every node: print its command "
            "with --dry-run --rdzv-endpoint HOST:PORT, or use --slurm or --launcher k8s"
        )
    if parity is not None:
        return _parity(request, parity, launcher, as_json, tolerance)
    if tolerance is not None:
        raise InputError("--tolerance is for --parity")
    prepared = preparing.prepare(request)
    if request.dry_run:
        return _dry_run(prepared, launcher, as_json)
    _run(prepared, launcher, request.timeout, request.memory_limit, as_json)


def _run(prepared, launcher, timeout, limit, as_json: bool) -> None:
    """The run: its progress on stderr, then what it measured, and exit 1 unless it proves the
    batch."""
    from translator.launch import judging, preparing, run_model, smoke, throughput
    from translator.launch.progress import Progress
    from translator.words.errors import ConfigError
    from translator.words.findings import counted

    say = Progress()  # stderr: with --json, stdout holds the one object and nothing else
    plan = prepared.plan
    if prepared.model.said:
        say(f"smoke: {prepared.model.said}")
    say(
        f"smoke: {preparing.engine_words(preparing.engine_info(prepared))} on {plan.device}, "
        f"{counted(plan.nnodes, 'node')} × {plan.nproc}, "
        f"{counted(plan.steps, 'step')}, global batch {prepared.spec.global_batch_size}, "
        f"workdir {plan.workdir}"
    )
    warning = throughput.long_run_warning(prepared, None if launcher.remote else os.cpu_count())
    if warning:
        say(warning)
    done = smoke.run(prepared, launcher, timeout, limit, say)
    out = done.output
    if as_json:
        emit_json(out)
    else:
        click.echo(printable(run_model.line(out["model"])))
        if out["optimizer_steps"] == plan.steps:
            _table(out)
        elif out["optimizer_steps"]:  # stopped early: what ran, or (none ran) only the error
            _table(out, stopped_of=plan.steps)
        print_findings(prepared.findings)
    line = judging.verdict(done.report, plan)
    if done.report.errors:
        click.echo(f"batchspec: {line}", err=True)
        sys.exit(INTERRUPTED if done.stopped == "interrupted" else ConfigError.exit_code)
    click.echo(line, err=as_json)


def _parity(request, other, launcher, as_json, tolerance) -> None:
    """``smoke FILE --parity B``: both runs, compared (or, with --dry-run, what would run)."""
    from translator.launch import parity, parity_compare
    from translator.launch.progress import Progress
    from translator.words.errors import ConfigError

    a, b = parity.sides(request, other)
    if request.dry_run:
        if as_json:
            emit_json(
                {"a": _dry_output(a.prepared, launcher), "b": _dry_output(b.prepared, launcher)}
            )
            return
        for side in (a, b):
            click.echo(f"# run {side.label}: {side.source}")
            _dry_run(side.prepared, launcher, False)
        return
    tolerance = tolerance or parity.TOLERANCE[a.prepared.plan.device]
    done = parity.run(a, b, launcher, request.timeout, request.memory_limit, tolerance, Progress())
    if as_json:
        emit_json(done.output)
    elif done.output["difference"] is not None:
        print_table(parity_compare.rows(done.output), title=f"parity ({a.prepared.plan.framework})")
    if done.errors:
        click.echo(f"batchspec: error: parity fails: {'; '.join(done.errors)}", err=True)
        sys.exit(INTERRUPTED if done.stopped == "interrupted" else ConfigError.exit_code)
    click.echo(f"ok: {parity_compare.summary(done.output)}", err=as_json)


def _dry_output(prepared, launcher) -> dict:
    """What ``launcher`` would write and run, as ``--json`` says it."""
    from translator.launch.preparing import engine_info
    from translator.launch.smoke import variables

    plan = prepared.plan
    built = launcher.build(plan, variables(plan.framework, None))
    return prepared.spec.output() | {
        "engine": engine_info(prepared),
        "model": prepared.model.output(None),
        "framework": plan.framework,
        "launcher": launcher.name,
        "command": built.ranks,
        "files": built.files,
        "sbatch": built.files.get("smoke.sbatch"),
        "submit": None if launcher.name == "local" else built.submit,
        "workdir": str(plan.workdir),
    }


def _dry_run(prepared, launcher, as_json) -> None:
    """What ``launcher`` would write and run, written nowhere (the findings on stderr). The
    header lines are comments with their control characters escaped, so that the printed
    manifest stays one stream of its own documents (``| kubectl apply -f -``)."""
    out = _dry_output(prepared, launcher)
    if as_json:
        emit_json(out)
        return
    print_findings(prepared.findings, err=True)
    import shlex

    from translator.launch.preparing import engine_words

    plan = prepared.plan
    names = [f"{plan.workdir}/{name}" for name in ("spec.json", plan.config_name)]
    names += [f"{plan.workdir}/{name}" for name in prepared.partner_files]
    names = list(dict.fromkeys(names + ([str(plan.model_config)] if plan.model_config else [])))
    listed = f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else names[0]
    click.echo(f"# engine: {engine_words(out['engine'])}")
    click.echo(f"# would write {printable(listed)}")
    if not out["files"]:
        click.echo(shlex.join(out["command"]))
        return
    for name, text in out["files"].items():
        submitted = shlex.join(out["submit"])
        click.echo(printable(f"# and {plan.workdir}/{name}, submitted as: {submitted}"))
        click.echo(text.rstrip("\n"))


def _table(out: dict, stopped_of: int | None = None) -> None:
    """What was measured; for a run that stopped before the ``stopped_of`` steps it was to
    take, only what it measured until then."""
    from translator.launch.judging import run_lengths
    from translator.launch.preparing import engine_words

    def mem(n):
        return f"{n / 2**20:.0f} MiB" if n else None

    samples = out["samples_per_optimizer_step"]
    packed = out.get("packed_rows_per_optimizer_step")
    rows = [
        ("engine", engine_words(out["engine"])),
        ("global batch", out["global_batch_size"]),
        ("micro-batch", out["micro_batch_size"]),
        ("accumulation", out["gradient_accumulation_steps"]),
        ("data-parallel", out["data_parallel_size"]),
        ("world", out["world_size"]),
        ("optimizer steps", out["optimizer_steps"]),
        ("samples per step", None if samples is None else run_lengths(samples)),
        *([] if packed is None else [("packed rows per step", run_lengths(packed))]),
        (
            "tokens/s",
            None if out["tokens_per_second"] is None else f"{out['tokens_per_second']:,.0f}",
        ),
        (
            "median step",
            None if out["step_time_seconds"] is None else f"{out['step_time_seconds']:.3f} s",
        ),
        ("peak memory", mem(out["peak_memory_bytes"])),
        ("baseline", _baseline(out.get("baseline_memory_bytes"))),
        ("estimated", _estimated(out.get("estimated_memory"), out.get("baseline_memory_bytes"))),
        ("device", out["device"]),
        ("stepped by", out["stepped_by"]),
    ]
    if out["mfu"] is not None:
        rows.append(("MFU", f"{out['mfu']:.1%} ({out['mfu_formula']})"))
    title = f"smoke ({out['framework']})"
    if stopped_of is not None:  # what ran before it stopped, and nothing it did not measure
        rows[6] = ("optimizer steps", f"{out['optimizer_steps']} of {stopped_of}")
        rows = [rows[0]] + [(k, v) for k, v in rows[6:] if v is not None]
        title += ": what ran before it stopped"
    print_table(rows, title=title)


def _baseline(baseline: int | None) -> str | None:
    """What a CPU rank held before it built the model, which its peak holds and no estimate
    counts; None on a GPU."""
    if not baseline:
        return None
    return (
        f"{baseline / 2**20:.0f} MiB before the model was built (the process: Python, torch, "
        "the framework as far as imported), in the peak, not in the estimate"
    )


def _estimated(found: dict | None, baseline: int | None) -> str | None:
    """The memory estimate of the run as it ran (model states, and all parts), beside the peak;
    with the baseline added on a CPU, where the peak holds the whole process."""
    if not found:
        return None
    said = (
        f"{found['model_states_bytes'] / 2**20:.0f} MiB model states, "
        f"{found['total_bytes'] / 2**20:.0f} MiB in all (batchspec estimate)"
    )
    if baseline:
        said += f"; with the baseline {(found['total_bytes'] + baseline) / 2**20:.0f} MiB"
    return said
