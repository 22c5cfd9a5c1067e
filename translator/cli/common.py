"""What every command shares: ``--json``/``--debug``, turning errors into exit codes, the
spec and launch flags, reading several files (inspect, validate), and output (one JSON object,
or a compact table)."""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Sequence

import click

from translator.job.foreign import ForeignConfig
from translator.plugin import registry as frameworks
from translator.words.errors import BatchspecError, ConfigError, InputError
from translator.words.findings import Finding

#: Where a command's docstring starts its examples, shown last in its ``--help``.
EXAMPLES = "\nExamples:\n"


class ExamplesLast(click.Command):
    """A command whose docstring ends with an ``Examples:`` paragraph (``$ batchspec ...``
    lines, each run by a test): ``--help`` shows it after the options, as written."""

    def __init__(self, name: str | None, **kwargs):
        text = inspect.cleandoc(kwargs.get("help") or "")
        if EXAMPLES in text and kwargs.get("epilog") is None:
            kwargs["help"], _, examples = text.partition(EXAMPLES)
            # click rewraps every paragraph but one that starts with \b
            kwargs["epilog"] = f"\b{EXAMPLES}{examples}"
        super().__init__(name, **kwargs)


class ScriptArguments(ExamplesLast):
    """A command whose words after ``--`` are a launch script's own arguments
    (``inspect job.sh -- --mbs 2``), kept apart from the command's."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            at = args.index("--")
            ctx.meta["batchspec.script_args"] = tuple(args[at + 1 :])
            args = args[:at]
        return super().parse_args(ctx, args)


#: Severities, the least first.
SEVERITIES = ("info", "warning", "error")
#: Where a command keeps, for the printers below it, what ``--debug``, ``--quiet`` and
#: ``--min-severity`` asked for (the click context's ``meta``).
DEBUG, QUIET, LEAST = "batchspec.debug", "batchspec.quiet", "batchspec.least"


#: The exit status of a command stopped by SIGTERM (128 + 15, as a shell reports it).
TERMINATED = 143
#: The exit status of a run stopped by Ctrl-C (128 + SIGINT's 2).
INTERRUPTED = 130


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, ``kill``, a scheduler ending the job that runs batchspec), raised
    where the signal lands so that a run stops as on Ctrl-C: its processes ended, its Slurm jobs
    cancelled, what ran said."""


@contextlib.contextmanager
def stopped_by_sigterm():
    """Within it, SIGTERM raises :class:`Terminated`, and the run's exit status for an
    interruption becomes :data:`TERMINATED` (without this, SIGTERM ends batchspec at once and
    leaves its ranks' process group, or its Slurm job, running)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got = []

    def terminate(signum, frame):
        got.append(signum)
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    except SystemExit as exc:
        if got and exc.code == INTERRUPTED:
            raise SystemExit(TERMINATED) from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def command(name: str, findings: bool = True, stoppable: bool = False, **kwargs):
    """A click command with ``--json`` and ``--debug`` (and, where it prints ``findings``,
    ``--quiet`` and ``--min-severity``); the only place errors become exit codes. A
    ``stoppable`` command (one that starts processes) stops them on SIGTERM as on Ctrl-C."""

    def decorate(fn):
        @functools.wraps(fn)
        def run(
            as_json: bool,
            debug: bool,
            quiet: bool = False,
            min_severity: str | None = None,
            **params,
        ):
            meta = click.get_current_context().meta
            meta[DEBUG], meta[QUIET] = debug, quiet
            try:
                if quiet and min_severity:
                    raise InputError("give --quiet or --min-severity, not both")
                meta[LEAST] = "error" if quiet else min_severity or "info"
                with stopped_by_sigterm() if stoppable else contextlib.nullcontext():
                    fn(as_json=as_json, **params)
            except BatchspecError as exc:
                if debug:
                    raise
                fail(
                    str(exc),
                    exc.exit_code,
                    as_json,
                    getattr(exc, "findings", []),
                    exc.framework if isinstance(exc, ForeignConfig) else None,
                )
            except (KeyboardInterrupt, click.exceptions.Exit, click.ClickException):
                raise
            except BrokenPipeError:
                leave_quietly()
            except Exception as exc:  # a bug in batchspec: still one line, traceback on --debug
                if debug:
                    raise
                fail(
                    f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)", 1, as_json
                )

        if findings:
            run = severity_options(run)
        run = click.option("--debug", is_flag=True, help="Show a traceback on errors.")(run)
        run = click.option(
            "--json",
            "as_json",
            is_flag=True,
            help="Print one JSON object on stdout and nothing else there.",
        )(run)
        return click.command(name, cls=ScriptArguments, **kwargs)(run)

    return decorate


def severity_options(fn):
    """``--quiet`` and ``--min-severity``: which findings the text output shows."""
    fn = click.option(
        "--min-severity",
        type=click.Choice(SEVERITIES),
        help="Print only findings at least this severe (default: info, all of them; --json "
        "always lists every finding).",
    )(fn)
    return click.option(
        "--quiet",
        "-q",
        is_flag=True,
        help="Print errors only: --min-severity error (validate: and no line for a file "
        "that is ok).",
    )(fn)


def fail(
    message: str,
    code: int,
    as_json: bool,
    findings: Sequence[Finding] = (),
    framework: str | None = None,
) -> None:
    """Report an error: one line on stderr (and the JSON object on stdout: the resolved batch's
    keys, all null, so an answer has one shape whatever happened; ``framework``: the one the
    file is for, when it is known), then exit."""
    from translator.spec import OUTPUT_KEYS

    click.echo(f"batchspec: error: {printable(message)}", err=True)
    if as_json:
        emit_json(
            {"framework": framework}
            | {key: None for key in OUTPUT_KEYS}
            | {"error": message, "exit_code": code, "findings": [f.as_dict() for f in findings]}
        )
    sys.exit(code)


def leave_quietly() -> None:
    """stdout's reader has gone (``| head``): exit without a word, as Python's documentation
    advises for SIGPIPE (stdout points at devnull, so the final flush cannot fail again)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a test runner)
        pass
    sys.exit(128 + 13)  # what a shell reports for a process that SIGPIPE ended


#: Control characters (C0, DEL, C1) and the Unicode line separators -> Python's escape for each.
_ESCAPES = {c: repr(chr(c))[1:-1] for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]}


def printable(text: object) -> str:
    """``text`` safe for a terminal: control characters escaped the way Python writes them
    (``\\n``, ``\\x1b``), so a value from a file can neither forge a line nor drive the terminal."""
    return str(text).translate(_ESCAPES)


def emit_json(obj) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False))


COUNT = click.IntRange(min=1)


class OldSpellings(click.Option):
    """An option whose first name is the one ``--help`` shows; its other names are old
    spellings, kept working and hidden (``--gpus-per-node`` for ``--nproc-per-node``)."""

    def get_help_record(self, ctx: click.Context):
        names, self.opts = self.opts, self.opts[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = names


#: Old spellings of the spec flags, still accepted (hidden from ``--help``).
SPEC_OLD_SPELLINGS = {"--nproc-per-node": ("--gpus-per-node",)}

#: (flag, spec field, type, help) for every flag that sets a spec field.
SPEC_FLAGS = [
    (
        "--global-batch",
        "global_batch_size",
        COUNT,
        "Samples per optimizer step, all ranks together.",
    ),
    ("--micro-batch", "micro_batch_size", COUNT, "Samples per forward/backward on one rank."),
    ("--accumulation", "gradient_accumulation_steps", COUNT, "Micro-batches per optimizer step."),
    ("--world-size", "world_size", COUNT, "All processes (GPUs)."),
    ("--nnodes", "nodes", COUNT, "Nodes (with --nproc-per-node)."),
    ("--nproc-per-node", "gpus_per_node", COUNT, "Processes (GPUs) per node."),
    ("--tp", "tensor_parallel_size", COUNT, "Tensor-parallel size."),
    ("--pp", "pipeline_parallel_size", COUNT, "Pipeline-parallel size."),
    ("--cp", "context_parallel_size", COUNT, "Context-parallel size."),
    ("--ep", "expert_parallel_size", COUNT, "Expert-parallel size."),
    ("--num-experts", "num_experts", COUNT, "Experts per MoE layer."),
    ("--vp", "virtual_pipeline_stages", COUNT, "Virtual pipeline stages per pipeline rank."),
    ("--seq-len", "sequence_length", COUNT, "Tokens per sample."),
    (
        "--lr",
        "learning_rate",
        click.FloatRange(min=0, min_open=True),
        "Learning rate tuned at --lr-batch.",
    ),
    ("--lr-batch", "reference_global_batch_size", COUNT, "Global batch the --lr was tuned for."),
]


def spec_options(fn):
    """Flags that set spec fields; the command receives them as keyword arguments."""
    for flag, field, kind, help_text in reversed(SPEC_FLAGS):
        names = (flag, *SPEC_OLD_SPELLINGS.get(flag, ()), field)
        fn = click.option(*names, cls=OldSpellings, type=kind, default=None, help=help_text)(fn)
    return fn


def pop_spec_values(params: dict) -> dict:
    """Take the spec flags out of a command's parameters, leaving the rest."""
    return {field: params.pop(field) for _, field, _, _ in SPEC_FLAGS}


def print_table(rows: Sequence[tuple[str, object]], title: str | None = None) -> None:
    """Two aligned columns; ``None`` shows as ``-``."""
    if title:
        click.echo(printable(title))
    rows = [(printable(k), "-" if v is None else printable(v)) for k, v in rows]
    width = max((len(k) for k, _ in rows), default=0)
    for key, value in rows:
        click.echo(f"  {key.ljust(width)}  {value}")


def print_sources(sources) -> None:
    """Where each batch value of a job comes from; a source that lost says to which and why."""
    if not sources:
        return
    click.echo("  from")
    for s in sources:
        line = f"    {s.name.replace('_', ' ')} {s.value}: {s.where}"
        if not s.won:
            line += f" (not used: {s.why})" if s.why else " (not used)"
        click.echo(printable(line))


def asked(key: str, default=None):
    """What the running command was asked for (``DEBUG``, ``QUIET``, ``LEAST``)."""
    ctx = click.get_current_context(silent=True)  # its meta is every nested context's
    return default if ctx is None else ctx.meta.get(key, default)


class FindingsPrinter:
    """Prints findings as lines, those below ``--min-severity`` left out. An info said
    identically of several of ``files`` (the findings of each file) is printed once, under the
    first, with the number of files; a warning or error about one place said again (a
    DeepSpeed JSON's own error, under each job that uses it) is printed whole once, and after
    that as one line that says so."""

    def __init__(self, files: Sequence[Sequence[Finding]] = ()):
        self.least = SEVERITIES.index(asked(LEAST, "info"))
        self.files_with = Counter(key for one in files for key in {_same(f) for f in one})
        self.printed: set = set()

    def print(self, findings: Sequence[Finding], err: bool = False) -> None:
        """Each finding as a line (and its fix on the next), control characters escaped."""
        for f in findings:
            if SEVERITIES.index(f.severity) < self.least:
                continue
            key, where = _same(f), f" [{f.where}]" if f.where else ""
            if key is not None and self.files_with[key] > 1:
                if key in self.printed:
                    continue
                self.printed.add(key)
                where = f" ({self.files_with[key]} files)"
            place = _place(f)
            if place in self.printed:
                click.echo(printable(f"{f.severity}: {f.code}{where}: as above"), err=err)
                continue
            if place is not None:
                self.printed.add(place)
            click.echo(printable(f"{f.severity}: {f.code}{where}: {f.message}"), err=err)
            if f.hint:
                click.echo(printable(f"  fix: {f.hint}"), err=err)


def _same(f: Finding) -> tuple | None:
    """What makes infos about different files the same info; None for a warning or error,
    each of which is printed where it is."""
    return (f.code, f.message, f.hint) if f.severity == "info" else None


def _place(f: Finding) -> tuple | None:
    """What makes a warning or error the same one again: its words at the same place (the
    file resolved, so ``ds.json:3`` and its absolute path are one); None for an info or a
    finding that names no place."""
    if f.severity == "info" or not f.where:
        return None
    path, colon, line = f.where.rpartition(":")
    path, line = (path, line) if colon and line.isdigit() else (f.where, "")
    return (f.code, f.message, f.hint, os.path.realpath(path), line)


def print_findings(findings: Sequence[Finding], err: bool = False) -> None:
    """The findings of one file or spec, as :class:`FindingsPrinter` prints them."""
    FindingsPrinter().print(findings, err)


def exit_for(findings: list[Finding]) -> None:
    """Exit 1 when any finding is an error (after the output has been printed)."""
    if any(f.severity == "error" for f in findings):
        sys.exit(ConfigError.exit_code)


def launch_options(fn):
    """``--framework`` and the launch flags that say what a config file may not."""
    options = [
        click.option(
            "--framework",
            type=click.Choice(frameworks.names()),
            default=None,
            help="Read the files as this framework's (default: detect).",
        ),
        click.option("--world-size", type=COUNT, default=None, help="All processes launched."),
        click.option("--nnodes", type=COUNT, default=None, help="Nodes (with --nproc-per-node)."),
        click.option(
            "--nproc-per-node",
            type=COUNT,
            default=None,
            help="Processes per node (with --nnodes, or with --world-size: world / N nodes).",
        ),
        click.option(
            "--tp",
            type=COUNT,
            default=None,
            help="Tensor-parallel size, when the file does not say (DeepSpeed under Megatron).",
        ),
        click.option("--pp", type=COUNT, default=None, help="Pipeline-parallel size, likewise."),
        click.option("--cp", type=COUNT, default=None, help="Context-parallel size, likewise."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def job_options(fn):
    """How a launch script is run: ``--env NAME=VALUE``, ``--run-dir``; its own arguments go
    after ``--``."""
    fn = click.option(
        "--run-dir",
        type=click.Path(file_okay=False),
        default=None,
        help="The folder the job runs in, where the paths it names start (default: the "
        "current folder, then the script's).",
    )(fn)
    return click.option(
        "--env",
        "environment",
        multiple=True,
        metavar="NAME=VALUE",
        help="Read a launch script with this variable set in its environment (repeatable); "
        "its arguments go after --.",
    )(fn)


def pop_run_as(params: dict):
    """Take the job options out of a command's parameters as a :class:`~translator.job.script.RunAs`;
    the script's arguments are what followed ``--``."""
    import re

    from translator.job.script import RunAs
    from translator.words.errors import InputError

    environment = {}
    for item in params.pop("environment", ()):
        name, eq, value = item.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise InputError(f"--env {item!r}: give NAME=VALUE")
        environment[name] = value
    args = click.get_current_context().meta.get("batchspec.script_args")
    return RunAs(args, environment, params.pop("run_dir", None))


def pop_launch(params: dict):
    """Take the launch flags out of a command's parameters as a :class:`Launch`."""
    from translator.reading import Launch

    world, nnodes, nproc = (params.pop(k) for k in ("world_size", "nnodes", "nproc_per_node"))
    world, nnodes = layout_of(world, nnodes, nproc)
    return Launch(world, params.pop("tp"), params.pop("pp"), params.pop("cp"), nodes=nnodes)


def layout_of(
    world: int | None, nnodes: int | None, nproc: int | None
) -> tuple[int | None, int | None]:
    """``(world, nodes)`` from the layout flags: ``--world-size``, ``--nnodes`` with
    ``--nproc-per-node``, or ``--world-size`` with ``--nproc-per-node`` (world / N nodes);
    nodes ``None`` when the flags do not say them (a world given alone)."""
    from translator.batch.solve import whole_nodes
    from translator.words.errors import InputError

    if nproc is None:
        if nnodes is not None:
            raise InputError("give --nproc-per-node with --nnodes, or --world-size alone")
        return world, None
    if nnodes is not None:
        if world is not None and world != nnodes * nproc:
            raise InputError(f"--world-size {world} ≠ --nnodes {nnodes} × --nproc-per-node {nproc}")
        return nnodes * nproc, nnodes
    if world is None:
        raise InputError("give --nnodes or --world-size with --nproc-per-node")
    return world, whole_nodes(world, nproc, "--world-size", "--nproc-per-node")


def inspect_all(files, framework, launch, skip_others: bool = False, run_as=None):
    """``(inspections, unusable)``: each readable file inspected; each unusable one's error.
    With ``skip_others``, files that are neither configs with batch settings nor jobs that
    launch a training program are passed over."""
    from translator.batch.spec_file import spec_values
    from translator.inspection import inspect_together, is_batch_config, read_file
    from translator.job.definitions import system_of
    from translator.job.script import is_job
    from translator.words.errors import InputError, NotAJob
    from translator.words.files import read_text

    loaded, unusable = [], []
    for path in files:
        try:
            if skip_others:
                text = read_text(path)
                if (
                    not is_job(path, text)
                    and system_of(path, text) is None
                    and not is_batch_config(path, text, framework)
                ):
                    continue
                if framework is None and spec_values(text, path) is not None:
                    continue  # a batchspec spec: plan and render check it
            loaded.append(read_file(path, framework, run_as))
        except InputError as exc:
            if skip_others and isinstance(exc, NotAJob):
                continue
            if len(files) == 1:
                raise
            click.echo(f"batchspec: error: {printable(exc)}", err=True)
            named = exc.framework if isinstance(exc, ForeignConfig) else None
            unusable.append(unusable_output(path, str(exc), named))
    return inspect_together(loaded, launch), unusable


def unusable_output(path: str, error: str, framework: str | None = None) -> dict:
    """A file that could not be used, in the shape of an inspection's output: every batch key
    null, no sources, no findings, and the error."""
    from translator.spec import OUTPUT_KEYS

    return (
        {"file": path, "framework": framework}
        | {key: None for key in OUTPUT_KEYS}
        | {"sources": [], "findings": [], "error": error}
    )


def exit_code(inspections, unusable) -> int:
    """2 when a file could not be used, else 1 when any has an error finding, else 0."""
    if unusable:
        return 2
    return 1 if any(f.severity == "error" for i in inspections for f in i.findings) else 0


#: ``--out -``: the one file goes to stdout.
STDOUT = "-"


def folder_not_stdout(ctx: click.Context, param: click.Parameter, value: str | None):
    """A ``--out`` folder where several files may go: ``-`` (stdout) is refused."""
    if value == STDOUT:
        raise click.BadParameter("- (stdout) takes one file; give a folder", ctx, param)
    return value


def frameworks_help(what: str) -> str:
    """Help for an option that takes frameworks: ``what``, then every registered name."""
    return f"{what}: comma-separated, or {frameworks.ALL}, of {', '.join(frameworks.names())}."


def output_options(fn):
    """``--to``, ``--out`` and ``--force``: where rendered configs go."""
    return _outputs(fn, into=False)


def into_options(fn):
    """:func:`output_options`, with ``--into`` in place of ``--out``: existing configs to
    write the batch keys into."""
    return _outputs(fn, into=True)


def _outputs(fn, into: bool):
    fn = click.option("--force", is_flag=True, help="Overwrite files that already exist.")(fn)
    fn = click.option(
        "--strict",
        is_flag=True,
        help="Write nothing and exit 1 when any framework of --to cannot take the batch "
        "(default: write those that can, and list the others with their reason).",
    )(fn)
    if into:
        fn = click.option(
            "--into",
            "into",
            type=click.Path(exists=True),
            help="Write the batch keys into this existing config of the --to framework, every "
            "other byte kept (as update does); a folder: into each of its configs that a --to "
            "framework claims. In place of --out.",
        )(fn)
    fn = click.option(
        "--out",
        "out_dir",
        required=not into,
        type=click.Path(file_okay=False),
        help="Folder to write into (created when missing); - writes the one file on stdout.",
    )(fn)
    return click.option(
        "--to",
        "targets",
        required=True,
        metavar="FRAMEWORKS",
        help=frameworks_help("Frameworks to write for"),
    )(fn)


def render_each(
    spec, targets: Sequence, where: str, strict: bool = False, slurm=None
) -> tuple[list, dict]:
    """``(rendered, refused)``: ``spec`` rendered for each framework of ``targets`` that can
    take it, and why each other cannot (name -> the first error, naming ``where``, the file
    the batch came from). One framework asked for, every one refusing, or ``strict`` and any
    refusing: the errors are raised instead (exit 1). A spec that leaves the micro-batch open
    is refused for all (exit 2). ``slurm``: the Slurm layout of the job converted
    (:class:`~translator.batch.node_lines.SlurmJob`), kept by each script written."""
    from translator.render import render
    from translator.words.findings import located

    rendered, refused, errors = [], {}, []
    for framework in targets:
        try:
            rendered.append(render(spec, framework, slurm))
        except ConfigError as exc:
            found = located(exc.findings, where)
            errors += found
            refused[framework.name] = found[0].message
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    if errors and (strict or not rendered):
        raise ConfigError(errors)
    return rendered, refused


def write_rendered(
    as_json: bool,
    output: dict,
    rendered: list,
    out_dir: str,
    force: bool,
    findings: Sequence[Finding] = (),
    refused: dict[str, str] | None = None,
) -> None:
    """Write every rendered file into ``out_dir`` (none if any is refused: a symlink there
    that leads out of it among the reasons) and report them with the findings; ``out_dir``
    ``-`` prints the one file on stdout instead."""
    from pathlib import Path

    from translator.words.files import write_files

    findings = list(findings) + [f for r in rendered for f in r.findings]
    refused = refused or {}
    if out_dir == STDOUT:
        for name, why in refused.items():
            click.echo(printable(f"not written: {name}: {why}"), err=True)
        return _write_stdout(as_json, output, rendered, findings)
    paths = [Path(out_dir) / r.filename for r in rendered]
    written = write_files(
        [(path, r.text) for r, path in zip(rendered, paths)], force, within=out_dir
    )
    if as_json:
        emit_json(
            output
            | {
                "files": {r.framework: str(w.path) for r, w in zip(rendered, written)},
                "refused": refused,
                "findings": [f.as_dict() for f in findings],
            }
        )
    else:
        for w in written:
            click.echo(printable(f"wrote {w.describe()}"))
        for name, why in refused.items():
            click.echo(printable(f"not written: {name}: {why}"))
        print_findings(findings)


def write_into(
    as_json: bool,
    spec,
    frameworks: Sequence,
    into: str,
    strict: bool,
    findings: Sequence[Finding] = (),
) -> None:
    """``spec``'s batch keys written into existing configs (``render --into``): ``into`` a
    file, the one --to framework's, or a folder, each of its files a --to framework claims;
    every file or none, one line per change and one per framework not written."""
    import os
    from pathlib import Path

    from translator.edit.render_into import render_into, render_into_folder
    from translator.words.files import write_files

    if Path(into).is_dir():
        done, refused = render_into_folder(spec, list(frameworks), into, strict)
    elif len(frameworks) != 1:
        raise InputError(
            f"--into {into} is one file, and --to gives {len(frameworks)} frameworks "
            f"({', '.join(f.name for f in frameworks)}): give --into a folder"
        )
    else:
        done, refused = [render_into(spec, frameworks[0], into)], {}
    texts: dict[str, tuple[Path, str]] = {}
    for d in done:
        pairs = [(d.path, d.updated.text)] if d.updated.changes else []
        for path, text in [*pairs, *((o.path, o.text) for o in d.updated.others)]:
            seen = texts.setdefault(os.path.realpath(path), (Path(path), text))
            if seen[1] != text:
                raise InputError(f"{path}: two configs of --into would write it differently")
    write_files(list(texts.values()), force=True)
    findings = list(findings) + [f for d in done for f in d.updated.inspection.findings]
    if as_json:
        emit_json(
            spec.output()
            | {
                "files": {d.framework: d.path for d in done},
                "changes": {
                    path: [c.as_dict() for c in changes]
                    for d in done
                    for path, changes in [
                        (d.path, d.updated.changes),
                        *((o.path, o.changes) for o in d.updated.others),
                    ]
                    if changes
                },
                "refused": refused,
                "findings": [f.as_dict() for f in findings],
            }
        )
        return
    for d in done:
        if not d.updated.changed:
            click.echo(printable(f"{d.path}: {d.updated.already()}"))
        for change in d.updated.changes:
            click.echo(printable(change.describe(d.path)))
        for other in d.updated.others:
            for change in other.changes:
                click.echo(printable(change.describe(other.path)))
    for name, why in refused.items():
        click.echo(printable(f"not written: {name}: {why}"))
    print_findings(findings)


def _write_stdout(as_json: bool, output: dict, rendered: list, findings: list[Finding]) -> None:
    """The one rendered file on stdout and nothing else there (the findings go to stderr);
    with --json, its text is in the JSON object."""
    if len(rendered) != 1:
        raise InputError(
            f"--out - writes one file on stdout, and --to gives {len(rendered)} "
            f"({', '.join(r.framework for r in rendered)}): give --out a folder"
        )
    (one,) = rendered
    if as_json:
        emit_json(
            output
            | {
                "files": {one.framework: STDOUT},
                "text": one.text,
                "findings": [f.as_dict() for f in findings],
            }
        )
    else:
        click.echo(one.text, nl=False)
        print_findings(findings, err=True)
