"""A nanotron training launch in a job: ``torchrun ... run_train.py --config-file x.yaml``.

nanotron's training programs (its ``run_train.py``, the examples' ``train_mamba.py`` and the
like) take one flag, ``--config-file`` (argparse, so ``--config-file=x.yaml`` too), and every
batch value is in that YAML: nanotron has no command-line overrides. A program is nanotron's
when it is ``run_train.py`` or when the YAML it is given is nanotron's by content. The world is
the launcher's; the values are the YAML's, at their lines there (``update`` edits that file).
"""

from __future__ import annotations

from translator.frameworks.nanotron import rules
from translator.plugin.job_files import read_job_file
from translator.reading import Call, Note, Reading, Value
from translator.shell.values import Word
from translator.words.files import read_text
from translator.words.findings import finding

#: The program nanotron ships; any other is nanotron's only by the YAML it is given.
PROGRAM = "run_train.py"
#: The flag, as argparse takes it.
FLAG = "--config-file"


def program(call: Call) -> Reading | None:
    """nanotron's training from one launch command, or ``None`` when it runs none."""
    named = _config_word(call.arguments)
    ours = call.program.rsplit("/", 1)[-1] == PROGRAM
    if named is None:
        return _without_config(call) if ours else None
    located = call.locate(named.text) if named.text is not None else (None, "")
    found = located[0]
    if found is None and not ours:
        return None
    if found is not None and not rules.claims(read_text(found)):
        return None
    reading = Reading(call.path, rules.NAME, call.text)
    if named.text is None:
        reading.notes.append(Note(named.line, f"the nanotron config is {named.why_unknown}"))
        _unknown(reading, named, f"unknown: the config is {named.why_unknown}")
        return reading
    opened = read_job_file(
        reading,
        named.text,
        located,
        rules.read,
        kind="the nanotron config",
        reads_as="a nanotron config",
        where=f"{call.path}:{named.line}",
    )
    if isinstance(opened, str):
        _unknown(reading, named, opened)
    else:
        path, inner = opened
        reading.take(inner.values, str(path), rules.FIELDS)
        reading.findings += inner.findings
    return reading


def _config_word(words: list[Word]) -> Word | None:
    """The word after ``--config-file`` (or the value of ``--config-file=...``), the last one
    winning as argparse has it."""
    named = None
    for i, word in enumerate(words):
        text = word.text or ""
        if text == FLAG and i + 1 < len(words):
            named = words[i + 1]
        elif text.startswith(FLAG + "="):
            value = text[len(FLAG) + 1 :]
            named = Word(value, word.line, None)
    return named


def _without_config(call: Call) -> Reading:
    """``run_train.py`` without ``--config-file``: argparse refuses it (the flag is required)."""
    reading = Reading(call.path, rules.NAME, call.text)
    reading.findings.append(
        finding(
            "nanotron-missing-key",
            f"{call.program} is run without --config-file, which it requires (argparse: the "
            "following arguments are required: --config-file)",
            hint="give it --config-file with the nanotron YAML",
            where=f"{call.path}:{call.line}",
        )
    )
    _unknown(reading, None, "unknown: no config file is given")
    return reading


def _unknown(reading: Reading, named: Word | None, why: str) -> None:
    """Every required batch key unknown, for a config that cannot be read (the optional ones
    are not assumed: they would tell a generation the file may not be)."""
    line = None if named is None else named.line
    for key in (*rules.FRAGMENT_REQUIRED, rules.SEQUENCE):
        reading.values[key] = Value(None, line, None, why)
