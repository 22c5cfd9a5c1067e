"""A batchspec command: ``--json`` and ``--debug`` (``--quiet``, ``--min-severity``), its
examples shown last in ``--help``, the words after ``--`` kept for the launch script, SIGTERM
taken as Ctrl-C, and the one place where errors become exit codes."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence

import click

from translator.cli.output import DEBUG, LEAST, QUIET, SEVERITIES, emit_json, printable
from translator.job.foreign import ForeignConfig
from translator.words.errors import BatchspecError, InputError
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
                    {"world_size": getattr(exc, "world_size", None)},
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
    known: Mapping[str, int | None] | None = None,
) -> None:
    """Report an error: one line on stderr (and the JSON object on stdout: the resolved batch's
    keys, null but for what is ``known`` whatever the error (the world a launcher starts, for a
    program batchspec does not read), so an answer has one shape whatever happened;
    ``framework``: the one the file is for, when it is known), then exit."""
    from translator.spec import OUTPUT_KEYS

    click.echo(f"batchspec: error: {printable(message)}", err=True)
    if as_json:
        emit_json(
            {"framework": framework}
            | {key: (known or {}).get(key) for key in OUTPUT_KEYS}
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
