"""What commands print: text safe for a terminal, one JSON object, tables, findings (each said
once), the exit status they imply, and the files a command rendered."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Sequence

import click

from translator.words.errors import ConfigError, InputError
from translator.words.findings import Finding

#: Severities, the least first.
SEVERITIES = ("info", "warning", "error")

#: Where a command keeps, for the printers below it, what ``--debug``, ``--quiet`` and
#: ``--min-severity`` asked for (the click context's ``meta``).
DEBUG, QUIET, LEAST = "batchspec.debug", "batchspec.quiet", "batchspec.least"


def asked(key: str, default=None):
    """What the running command was asked for (``DEBUG``, ``QUIET``, ``LEAST``)."""
    ctx = click.get_current_context(silent=True)  # its meta is every nested context's
    return default if ctx is None else ctx.meta.get(key, default)


#: Control characters (C0, DEL, C1) and the Unicode line separators -> Python's escape for each.
_ESCAPES = {c: repr(chr(c))[1:-1] for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]}


def printable(text: object) -> str:
    """``text`` safe for a terminal: control characters escaped the way Python writes them
    (``\\n``, ``\\x1b``), so a value from a file can neither forge a line nor drive the terminal."""
    return str(text).translate(_ESCAPES)


def emit_json(obj) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False))


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


def exit_code(inspections, unusable) -> int:
    """2 when a file could not be used, else 1 when any has an error finding, else 0."""
    if unusable:
        return 2
    return 1 if any(f.severity == "error" for i in inspections for f in i.findings) else 0


#: ``--out -``: the one file goes to stdout.
STDOUT = "-"


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


def print_into(as_json: bool, spec, done: Sequence, refused: dict[str, str], findings) -> None:
    """What ``render --into`` wrote (:func:`~translator.edit.render_into.write_into`'s
    answer): one line per change and one per framework not written, then the findings."""
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


def print_unusable(unusable: Sequence[dict]) -> None:
    """One error line on stderr for each file that could not be used."""
    for one in unusable:
        click.echo(f"batchspec: error: {printable(one['error'])}", err=True)
