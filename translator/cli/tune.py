"""``batchspec tune``: the fastest micro-batch that keeps the global batch exact, probed on the
real engine."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click

from translator.cli.common import command, emit_json, print_findings
from translator.cli.estimate import run_options
from translator.cli.smoke import engine_options, parse_memory, slurm_options, step_progress
from translator.findings import Finding
from translator.memory import GIB


@command("tune")
@click.argument("file", metavar="FILE")
@engine_options
@click.option(
    "--steps",
    type=click.IntRange(min=2),
    default=4,
    show_default=True,
    help="Optimizer steps per probe (the first is warm-up, not timed).",
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
@run_options
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Write the picked layout here, rendered for --to.",
)
@click.option(
    "--to",
    "targets",
    metavar="FRAMEWORKS",
    help="Frameworks to render the pick for (comma-separated; default: the tuned one).",
)
@click.option("--force", is_flag=True, help="Replace files in --out.")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    help="Write tokens/s and peak memory against micro-batch as a PNG (needs the "
    "plot extra: matplotlib).",
)
@click.option(
    "--in-allocation",
    is_flag=True,
    hidden=True,
    help="Run inside a Slurm allocation, probes as job steps (what --slurm submits).",
)
def tune(
    as_json: bool,
    file: str,
    framework,
    nproc,
    nnodes,
    seq_len,
    model,
    timeout,
    memory_limit,
    workdir,
    use_slurm,
    partition,
    account,
    time_limit,
    sbatch_extra,
    setup,
    device,
    gpus_per_node,
    cpus_per_task,
    steps,
    recompute,
    zero_stages,
    threshold,
    precision,
    attention,
    sequence_parallel,
    distributed_optimizer,
    overhead,
    out_dir,
    targets,
    force,
    plot_path,
    in_allocation,
) -> None:
    """Find the fastest micro-batch for FILE's global batch (a spec or a framework config).

    The candidates are the divisors of global / data-parallel, so each keeps the global batch
    exact; the memory estimate ranks them, the real engine probes them (the smoke harness: each
    probe's samples per step must be the global batch), bisecting for the out-of-memory edge and
    climbing toward the fastest, in at most ceil(log2 d) + 2 probes.
    """
    from translator.errors import InputError
    from translator.launch import smoke as runs
    from translator.launch import tune as probes
    from translator.launch.command import SmokePlan
    from translator.launch.engines import TORCH, engine, owners
    from translator.layouts import load_layout

    limit = parse_memory(memory_limit)
    options = slurm_options(
        use_slurm, partition, account, time_limit, sbatch_extra, setup, gpus_per_node, cpus_per_task
    )
    device = runs.resolve_device(device, use_slurm)
    spec, source = load_layout(file, None, {"world_size": nproc * nnodes})
    if spec.world_size != nproc * nnodes:
        raise InputError(
            f"{file} is for world size {spec.world_size}, but tune launches "
            f"{nproc * nnodes} (--nproc × --nnodes)"
        )
    framework = framework or source or TORCH
    stages = _zero_stages(zero_stages, framework)
    if recompute and "recompute" not in engine(framework).options:
        raise InputError(
            f"--recompute: the {framework} engine does not switch recomputation; "
            f"tune with --framework {owners('recompute')}"
        )
    seq = seq_len or spec.sequence_length or runs.DEFAULT_SEQUENCE[model]
    workdir = (workdir or Path(".batchspec-tune") / framework).resolve()
    plan = SmokePlan(
        framework=framework,
        nproc=nproc,
        nnodes=nnodes,
        steps=steps,
        model=model,
        sequence_length=seq,
        workdir=workdir,
        config_name="",
        device=device,
    )
    setup_ = probes.Setup(
        spec,
        plan,
        limit,
        None if timeout is None else time.monotonic() + timeout,
        in_allocation and probes.require_allocation(),
    )
    runs.check_engine(framework, spec, device)
    _check_outputs(spec, framework, out_dir, targets, force, plot_path)
    if use_slurm:
        return _submit(setup_, options, as_json, timeout)
    precision = precision or ("bf16" if device == "gpu" else "fp32")
    fixed = parse_memory(overhead, "--overhead") if overhead else (GIB if device == "gpu" else 0)
    estimator = probes.estimator(
        setup_,
        precision=precision,
        attention=attention,
        sequence_parallel=sequence_parallel,
        distributed_optimizer=distributed_optimizer,
        overhead=fixed,
    )
    capacity = limit or _gpu_memory(device)
    # Inside an allocation the progress goes to the job's log whatever the output format.
    quiet = as_json and not in_allocation
    say = (lambda text: None) if quiet else (lambda text: click.echo(text, err=True))
    result, seconds, stopped = _search(
        setup_, stages, recompute, estimator, capacity, threshold, say
    )
    _report(file, setup_, result, seconds, stopped, as_json, out_dir, targets, force, plot_path)


def _check_outputs(spec, framework, out_dir, targets, force, plot_path) -> None:
    """Refuse, before any probe, what would fail after them: a missing matplotlib, files in
    --out that are there already (and an unknown --to framework, through get_many)."""
    from translator.errors import InputError

    if plot_path:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise InputError("--plot needs matplotlib: pip install 'batchspec[plot]'") from None
    if out_dir:
        for _, path in _pick_files(framework, out_dir, targets):
            if path.exists() and not force:
                raise InputError(f"{path} exists; use --force to replace it (nothing was run)")


def _pick_files(framework: str, out_dir: str, targets: str | None) -> list[tuple[object, Path]]:
    """(framework or None for the spec itself, path) for each file --out will hold."""
    from translator.frameworks import get_many
    from translator.launch.engines import TORCH

    names = targets or (framework if framework != TORCH else None)
    if not names:
        return [(None, Path(out_dir) / "spec.json")]
    return [(b, Path(out_dir) / b.filename) for b in get_many(names)]


def _zero_stages(text: str | None, framework: str) -> list[int | None]:
    from translator.errors import InputError
    from translator.launch.engines import engine, owners

    if text is None:
        return [None]
    if "zero_stages" not in engine(framework).options:
        raise InputError(
            f"--zero-stages is for the {owners('zero_stages')} engine, not {framework}"
        )
    try:
        stages = sorted({int(s) for s in text.split(",")})
    except ValueError:
        raise InputError(f"--zero-stages {text!r}: give stages 0-3, comma-separated") from None
    if not stages or any(s not in (0, 1, 2, 3) for s in stages):
        raise InputError(f"--zero-stages {text!r}: give stages 0-3, comma-separated")
    return stages


def _gpu_memory(device: str) -> int | None:
    if device != "gpu":
        return None
    import torch

    return torch.cuda.get_device_properties(0).total_memory if torch.cuda.is_available() else None


def _search(setup, stages, recompute, estimator, capacity, threshold, say):
    """Run the search; a timeout or Ctrl-C ends it with the probes so far."""
    from translator import tuning
    from translator.launch import tune as probes

    per_rank = setup.spec.global_batch_size // setup.spec.data_parallel_size
    variants = [(r, z) for z in stages for r in ((False, True) if recompute else (False,))]
    d = len(tuning.divisors(per_rank))
    plan = setup.plan
    say(
        f"tune: {plan.framework} on {plan.device}, {plan.nnodes} node(s) × {plan.nproc}, "
        f"global batch {setup.spec.global_batch_size}: {d} micro-batches keep it exact, at most "
        f"{tuning.budget(d)} probes"
    )
    done: list = []

    def probe(c):
        say(
            f"probe {len(done) + 1}: micro-batch {c.micro_batch_size} × accumulation "
            f"{c.gradient_accumulation_steps}"
            + (" with recompute" if c.recompute else "")
            + (f", ZeRO {c.zero_stage}" if c.zero_stage is not None else "")
            + (f" (job step of {os.environ['SLURM_JOB_ID']})" if setup.in_allocation else "")
        )
        result = probes.run_probe(setup, c, estimator(c), step_progress(say, plan.steps))
        say(
            "  out of memory"
            if result.out_of_memory
            else f"  {result.tokens_per_second:,.0f} tokens/s, peak {_mib(result.peak_memory_bytes)}"
        )
        done.append(result)
        probes.save_progress(plan.workdir, done)
        return result

    start = time.monotonic()
    fits = (lambda c: None) if capacity is None else (lambda c: estimator(c) <= capacity)
    try:
        result = tuning.search(per_rank, variants, fits, probe, threshold)
    except (probes.Stopped, KeyboardInterrupt) as exc:
        stopped = exc.why if isinstance(exc, probes.Stopped) else "interrupted"
        why = (
            f"--timeout reached during probe {len(done) + 1}"
            if stopped == "timeout"
            else f"interrupted during probe {len(done) + 1}"
        )
        partial = tuning.Search(probes=done, reason=why + "; every process of it was stopped")
        return partial, time.monotonic() - start, stopped
    return result, time.monotonic() - start, None


def _mib(n) -> str:
    return "-" if not n else f"{n / 2**20:,.0f} MiB"


def fit_memory(result) -> dict | None:
    """Peak memory against micro-batch, least squares over the probes that ran: fixed + per
    sample (None with fewer than two distinct micro-batches)."""
    points = [
        (p.candidate.micro_batch_size, p.peak_memory_bytes)
        for p in result.probes
        if not p.out_of_memory and p.peak_memory_bytes and not p.candidate.recompute
    ]
    xs = {x for x, _ in points}
    if len(xs) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return {"fixed_bytes": int(my - slope * mx), "bytes_per_sample": int(slope)}


def _report(
    file, setup, result, seconds, stopped, as_json, out_dir, targets, force, plot_path
) -> None:
    from translator import tuning
    from translator.findings import finding
    from translator.launch.tune import candidate_spec

    spec, plan = setup.spec, setup.plan
    per_rank = spec.global_batch_size // spec.data_parallel_size
    d = len(tuning.divisors(per_rank))
    fit = fit_memory(result)
    picked = candidate_spec(spec, result.pick.candidate) if result.pick else None
    findings = []
    if picked is None and not stopped:
        findings.append(
            finding(
                "tune-nothing-fits",
                result.reason,
                where=file,
                hint="use more ranks, shard more (ZeRO, TP, PP), --recompute, "
                "a shorter sequence, or more memory",
            )
        )
    out = {
        "pick": picked.output() if picked else None,
        "reason": result.reason,
        "probes": [p.as_dict() for p in result.probes],
        "probes_used": len(result.probes),
        "budget": tuning.budget(d),
        "divisors": d,
        "seconds": round(seconds, 2),
        "framework": plan.framework,
        "device": plan.device,
        "model": plan.model,
        "sequence_length": plan.sequence_length,
        "memory_fit": fit,
        "stopped": stopped,
        "files": {},
        "findings": [f.as_dict() for f in findings],
    }
    if picked is not None and out_dir:
        out["files"] = _write_pick(picked, plan.framework, out_dir, targets, force)
    if plot_path:
        _plot_png(result, plot_path, spec.global_batch_size)
    if as_json:
        emit_json(out)
    else:
        _print(out)
    if stopped:
        click.echo(f"batchspec: error: tune stopped: {result.reason}", err=True)
        sys.exit(130 if stopped == "interrupted" else 1)
    if findings:
        sys.exit(1)


def _table(probes: list[dict], fit: dict | None) -> None:
    """The probes (``Probe.as_dict()``) as aligned columns, with the fitted memory."""
    rows = [
        ("micro", "accum", "recompute", "tokens/s", "step s", "peak", "estimate", "fitted", "OOM")
    ]
    for p in probes:
        micro = p["micro_batch_size"]
        fitted = (
            fit["fixed_bytes"] + fit["bytes_per_sample"] * micro
            if fit and not p["recompute"]
            else None
        )
        tokens, step = p["tokens_per_second"], p["step_time_seconds"]
        rows.append(
            (
                str(micro),
                str(p["gradient_accumulation_steps"]),
                "yes" if p["recompute"] else "no",
                "-" if tokens is None else f"{tokens:,.0f}",
                "-" if step is None else f"{step:.3f}",
                _mib(p["peak_memory_bytes"]),
                _mib(p["estimated_memory_bytes"]),
                _mib(fitted),
                "yes" if p["out_of_memory"] else "no",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  " + "  ".join(v.rjust(w) for v, w in zip(r, widths)))


def _terminal_plot(probes: list[dict]) -> str:
    """tokens/s per probed micro-batch as bars (the PNG needs matplotlib)."""
    ran = sorted(
        (p["micro_batch_size"], p["tokens_per_second"] or 0.0) for p in probes if not p["recompute"]
    )
    top = max((t for _, t in ran), default=0.0) or 1.0
    lines = ["tokens/s by micro-batch (# = ran, x = out of memory):"]
    for micro, tokens in ran:
        lines.append(
            f"  {micro:>6}  {'#' * round(40 * tokens / top)} {tokens:,.0f}"
            if tokens
            else f"  {micro:>6}  x"
        )
    return "\n".join(lines)


def _print(out: dict) -> None:
    """The human form of a tune's result (``out``: what --json prints)."""
    _table(out["probes"], out["memory_fit"])
    click.echo(_terminal_plot(out["probes"]))
    click.echo(
        f"{out['probes_used']} probe(s) of at most {out['budget']} ({out['divisors']} "
        f"micro-batches keep the global batch), {out['seconds']:.1f} s"
        + (f", Slurm job {out['slurm_job']}" if out.get("slurm_job") else "")
    )
    pick = out["pick"]
    if pick:
        click.echo(
            f"pick: micro-batch {pick['micro_batch_size']} × accumulation "
            f"{pick['gradient_accumulation_steps']} × data-parallel "
            f"{pick['data_parallel_size']} = {pick['global_batch_size']}"
        )
    click.echo(f"why: {out['reason']}")
    for name, path in out["files"].items():
        click.echo(f"wrote {path} ({name})")
    print_findings([Finding(**f) for f in out["findings"]])


def _plot_png(result, path: str, global_batch: int) -> None:
    import io

    import matplotlib

    from translator.files import write_files

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ran = sorted(
        (p.candidate.micro_batch_size, p.tokens_per_second, p.peak_memory_bytes)
        for p in result.probes
        if not p.out_of_memory and not p.candidate.recompute
    )
    fig, speed = plt.subplots(figsize=(6, 4))
    speed.plot([m for m, _, _ in ran], [t for _, t, _ in ran], "o-", label="tokens/s")
    speed.set_xscale("log", base=2)
    speed.set_xlabel("micro-batch")
    speed.set_ylabel("tokens/s")
    memory = speed.twinx()
    memory.plot(
        [m for m, _, _ in ran],
        [(b or 0) / GIB for _, _, b in ran],
        "s--",
        color="C1",
        label="peak memory",
    )
    memory.set_ylabel("peak memory (GiB)")
    speed.set_title(f"batchspec tune: every micro-batch keeps global batch {global_batch}")
    fig.legend(loc="lower right")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    write_files([(Path(path), buffer.getvalue())], force=True)


def _write_pick(spec, framework: str, out_dir: str, targets: str | None, force: bool) -> dict:
    from translator.files import write_files
    from translator.render import render

    files = []
    for target, path in _pick_files(framework, out_dir, targets):
        if target is None:
            files.append(("spec", path, spec.model_dump_json(indent=2)))
        else:
            files.append((target.name, path, render(spec, target).text))
    written = write_files([(path, text) for _, path, text in files], force, within=out_dir)
    return {name: str(w.path) for (name, _, _), w in zip(files, written)}


def _submit(setup, options, as_json: bool, timeout) -> None:
    """The whole tune as one Slurm job: submit, follow, print its result (or, stopped, the
    probes it had run)."""
    import json
    import shutil

    from translator.errors import InputError
    from translator.files import write_atomic
    from translator.launch import slurm
    from translator.launch import tune as probes
    from translator.launch.smoke import environment

    if shutil.which("sbatch") is None:
        raise InputError("sbatch not found: --slurm needs a Slurm login node")
    argv = [sys.executable, "-m", "translator", *_inner_args(), "--in-allocation", "--json"]
    text = probes.allocation_script(setup, argv, options)
    plan = setup.plan
    plan.workdir.mkdir(parents=True, exist_ok=True)
    result = plan.workdir / "tune.json"
    for stale in (result, plan.workdir / probes.PROGRESS_FILE):
        stale.unlink(missing_ok=True)
    path = plan.workdir / "tune.sbatch"
    write_atomic(path, text)
    env = environment(setup.memory_limit)
    job = slurm.submit(plan, str(path), env)
    say = (lambda t: None) if as_json else (lambda t: click.echo(t, err=True))
    say(f"submitted job {job}: the whole tune runs in one allocation")
    final = slurm.follow(job, env, timeout, lambda s: say(f"job {job}: {s}"))
    if final in ("timeout", "interrupted") or not result.exists() or not result.read_text():
        done = probes.read_progress(plan.workdir)
        if as_json:
            emit_json({"pick": None, "probes": done, "stopped": final, "slurm_job": job})
        else:
            click.echo(
                f"job {job} ended {final}; {len(done)} probe(s) ran "
                f"(see {plan.workdir}/slurm-{job}.out)"
            )
        click.echo(f"batchspec: error: tune job {job}: {final}", err=True)
        sys.exit(130 if final == "interrupted" else 1)
    out = json.loads(result.read_text()) | {"slurm_job": job}
    if as_json:
        emit_json(out)
    else:
        _print(out)
    if out.get("stopped") or out.get("pick") is None:
        sys.exit(1)


#: Options only the login side uses; the job gets every other one as given.
LOGIN_ONLY = {
    "use_slurm",
    "partition",
    "account",
    "time_limit",
    "sbatch_extra",
    "setup",
    "gpus_per_node",
    "cpus_per_task",
    "timeout",
    "in_allocation",
    "as_json",
    "debug",
}


def _inner_args() -> list[str]:
    """This tune's own command line for the job, rebuilt from the parsed options."""
    ctx = click.get_current_context()
    args = ["tune"]
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.name in LOGIN_ONLY or value in (None, False, ()):
            continue
        if isinstance(param, click.Argument):
            args.append(str(Path(value).resolve()))
        elif param.is_flag:
            args.append(param.opts[0])
        else:
            for one in value if param.multiple else [value]:
                args += [param.opts[0], str(one)]
    return args
